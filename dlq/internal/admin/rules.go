package admin

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/rules"
	"github.com/hookline/hookline/dlq/internal/store"
)

// rulesRequest is POST /rules/test's body: a request (body or
// body_base64, headers, event_type) or a stored delivery (from_dlq,
// from_raw), for a provider (optional with a stored delivery).
type rulesRequest struct {
	Provider   string            `json:"provider"`
	Body       *string           `json:"body"`
	BodyBase64 string            `json:"body_base64"`
	Headers    map[string]string `json:"headers"`
	EventType  string            `json:"event_type"`
	FromDLQ    string            `json:"from_dlq"`
	FromRaw    string            `json:"from_raw"`
}

// testRules answers POST /rules/test: per route of the provider, whether
// the delivery matches and which part of its rule decided (rules.Test),
// as dlq rules test --json does.
func (s *Server) testRules(c *gin.Context) {
	var req rulesRequest
	if !readJSON(c, &req) {
		return
	}
	in, name, ok := s.rulesInput(c, req)
	if !ok {
		return
	}
	p, found := s.cfg.Providers.Get(name)
	if !found {
		fail(c, http.StatusNotFound, "not_found", "provider "+quote(name)+" is not in the providers file")
		return
	}
	res, err := rules.Test(p, in, rules.Transform)
	if err != nil {
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	c.JSON(http.StatusOK, res)
}

// rulesInput checks req and reads the delivery it names; false: answered.
func (s *Server) rulesInput(c *gin.Context, req rulesRequest) (rules.Input, string, bool) {
	n := 0
	for _, set := range []bool{req.Body != nil || req.BodyBase64 != "", req.FromDLQ != "", req.FromRaw != ""} {
		if set {
			n++
		}
	}
	bad := func(msg string) (rules.Input, string, bool) {
		fail(c, http.StatusBadRequest, "bad_request", msg)
		return rules.Input{}, "", false
	}
	switch {
	case n != 1:
		return bad("give one of body (or body_base64), from_dlq, from_raw")
	case req.Body != nil && req.BodyBase64 != "":
		return bad("body and body_base64 exclude each other")
	case req.FromDLQ == "" && req.FromRaw == "":
		if req.Provider == "" {
			return bad("provider is required with a body")
		}
		body := []byte{}
		if req.Body != nil {
			body = []byte(*req.Body)
		} else {
			b, err := base64.StdEncoding.DecodeString(req.BodyBase64)
			if err != nil {
				return bad("body_base64: " + err.Error())
			}
			body = b
		}
		h := http.Header{}
		for k, v := range req.Headers {
			if strings.TrimSpace(k) == "" {
				return bad("headers: an empty name")
			}
			h.Set(k, v)
		}
		return rules.Input{Body: body, Header: h, EventType: req.EventType, Source: "body"}, req.Provider, true
	case len(req.Headers) > 0 || req.EventType != "":
		return bad("headers and event_type go with body (a stored delivery has its own)")
	}
	ref, source := req.FromDLQ, "dlq "+req.FromDLQ
	if req.FromRaw != "" {
		ref, source = req.FromRaw, "raw "+req.FromRaw
	}
	rf, err := store.ParseRef(ref)
	if err != nil {
		return bad(err.Error())
	}
	var r *kgo.Record
	if req.FromDLQ != "" {
		e, gerr := s.cfg.Store.Get(c.Request.Context(), rf)
		if gerr == nil {
			r = e.Record
		}
		err = gerr
	} else {
		r, err = s.cfg.Store.RawRecord(c.Request.Context(), rf)
	}
	if err != nil {
		kafkaFail(c, err)
		return rules.Input{}, "", false
	}
	name := rules.ProviderOf(r)
	if req.Provider != "" && req.Provider != name {
		return bad(source + " is of provider " + quote(name) + ", not " + quote(req.Provider))
	}
	return rules.FromRecord(r, source), name, true
}

func quote(s string) string { return `"` + s + `"` }
