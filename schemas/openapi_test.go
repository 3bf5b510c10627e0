package schemas

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenAPIDocuments: both documents load, every example in them
// validates against the schema beside it, and each lists answers.
func TestOpenAPIDocuments(t *testing.T) {
	for _, name := range []string{IngestAPI, DLQAPI} {
		t.Run(name, func(t *testing.T) {
			a, err := LoadAPI(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.CheckExamples(); err != nil {
				t.Error(err)
			}
			if n := len(a.Answers()); n < 10 {
				t.Errorf("%d answers listed: %v", n, a.Answers())
			}
		})
	}
	if _, err := LoadAPI("nope.yaml"); err == nil {
		t.Error("LoadAPI of an unknown name: no error")
	}
}

// TestOpenAPIResolution: the DLQ document's Resolution is the dlq-status
// schema: the same examples pass and fail.
func TestOpenAPIResolution(t *testing.T) {
	a, err := LoadAPI(DLQAPI)
	if err != nil {
		t.Fatal(err)
	}
	for _, valid := range []bool{true, false} {
		dir := filepath.Join("examples", DLQStatus)
		if !valid {
			dir = filepath.Join(dir, "invalid")
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(files) == 0 {
			t.Fatalf("no examples in %s", dir)
		}
		for _, f := range files {
			doc, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.ValidateComponent("Resolution", doc); (err == nil) != valid {
				t.Errorf("%s: Resolution says %v, want valid=%v", f, err, valid)
			}
		}
	}
}

// TestOpenAPICheck: Check takes a conforming answer and refuses each way an
// answer can stray from the document (a YAML answer too: ingest's GET
// /openapi.yaml).
func TestOpenAPICheck(t *testing.T) {
	a, err := LoadAPI(DLQAPI)
	if err != nil {
		t.Fatal(err)
	}
	jsonH := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	ingest, err := LoadAPI(IngestAPI)
	if err != nil {
		t.Fatal(err)
	}
	unauth := `{"error":"unauthorized","message":"send a token"}`
	wwwAuth := `Bearer realm="hookline-dlq"`
	for _, c := range []struct {
		name         string
		method, path string
		status       int
		h            http.Header
		body         string
		want         Answer
		err          string // "" means conforming
	}{
		{"templated route", "GET", "/dlq/3:17", 401, jsonH("WWW-Authenticate", wwwAuth), unauth, Answer{"GET", "/dlq/{ref}", 401}, ""},
		{"concrete route wins", "GET", "/dlq/stats", 200, jsonH(), `{"total":0,"unresolved":0,"resolved":0,"by_resolution":{},"by_provider":{},"by_route":{},"by_reason":{},"oldest":null,"oldest_unresolved":null}`, Answer{"GET", "/dlq/stats", 200}, ""},
		{"method of a templated route", "GET", "/dlq/replay", 400, jsonH(), `{"error":"bad_request","message":"bad ref"}`, Answer{"GET", "/dlq/{ref}", 400}, ""},
		{"rest of the path", "GET", "/events/github:octo/repo/7", 401, jsonH("WWW-Authenticate", wwwAuth), unauth, Answer{"GET", "/events/{key}", 401}, ""},
		{"rest of the path empty", "GET", "/events/", 400, jsonH(), `{"error":"bad_request","message":"the key is empty"}`, Answer{"GET", "/events/{key}", 400}, ""},
		{"not the rest of the path", "GET", "/events", 401, jsonH("WWW-Authenticate", wwwAuth), unauth, Answer{"GET", "/events", 401}, ""},
		{"unrouted", "DELETE", "/dlq", 404, jsonH(), `{"error":"not_found","message":"no such route"}`, Answer{"", Unrouted, 404}, ""},
		{"HEAD has no body", "HEAD", "/dlq", 404, jsonH(), ``, Answer{"", Unrouted, 404}, ""},
		{"GET without its body", "GET", "/nope", 404, jsonH(), ``, Answer{"", Unrouted, 404}, "not JSON"},
		{"status not listed", "GET", "/providers", 400, jsonH(), `{"error":"bad_request","message":"x"}`, Answer{"GET", "/providers", 400}, "does not list"},
		{"required header missing", "GET", "/dlq", 401, jsonH(), unauth, Answer{"GET", "/dlq", 401}, "WWW-Authenticate is required"},
		{"header off its schema", "GET", "/dlq", 401, jsonH("WWW-Authenticate", "Basic"), unauth, Answer{"GET", "/dlq", 401}, "header WWW-Authenticate"},
		{"wrong content type", "GET", "/dlq", 401, http.Header{"Content-Type": {"text/plain"}, "Www-Authenticate": {wwwAuth}}, unauth, Answer{"GET", "/dlq", 401}, "Content-Type"},
		{"no content type", "GET", "/dlq", 401, http.Header{"Www-Authenticate": {wwwAuth}}, unauth, Answer{"GET", "/dlq", 401}, "no Content-Type"},
		{"not JSON", "GET", "/dlq", 401, jsonH("WWW-Authenticate", wwwAuth), `{"error":`, Answer{"GET", "/dlq", 401}, "not JSON"},
		{"wrong error code", "GET", "/dlq", 401, jsonH("WWW-Authenticate", wwwAuth), `{"error":"not_found","message":"x"}`, Answer{"GET", "/dlq", 401}, "body"},
		{"extra field", "GET", "/dlq", 401, jsonH("WWW-Authenticate", wwwAuth), `{"error":"unauthorized","message":"x","trace":"y"}`, Answer{"GET", "/dlq", 401}, "body"},
		{"YAML", "GET", "/openapi.yaml", 200, http.Header{"Content-Type": {"application/yaml"}}, "openapi: 3.1.0\ninfo: {title: t}\npaths: {/x: {}}\n", Answer{"GET", "/openapi.yaml", 200}, ""},
		{"YAML off its schema", "GET", "/openapi.yaml", 200, http.Header{"Content-Type": {"application/yaml"}}, "openapi: 3.0.0\ninfo: {}\npaths: {/x: {}}\n", Answer{"GET", "/openapi.yaml", 200}, "body"},
		{"not YAML", "GET", "/openapi.yaml", 200, http.Header{"Content-Type": {"application/yaml"}}, "openapi: [", Answer{"GET", "/openapi.yaml", 200}, "not YAML"},
		{"time off its pattern", "POST", "/dlq/0:1/resolve", 200, jsonH(), `{"ref":"0:1","resolution":"ignored","note":"n","by":"b","at":"2026-11-21T14:00:00Z"}`, Answer{"POST", "/dlq/{ref}/resolve", 200}, "body"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := a
			if c.path == "/openapi.yaml" { // a YAML answer: ingest's
				doc = ingest
			}
			ans, err := doc.Check(c.method, c.path, c.status, c.h, []byte(c.body))
			if ans != c.want {
				t.Errorf("answer %v, want %v", ans, c.want)
			}
			switch {
			case c.err == "" && err != nil:
				t.Errorf("conforming answer refused: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("error %v, want one containing %q", err, c.err)
			}
		})
	}
}
