package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

// OpenAPI documents of the HTTP surfaces, as LoadAPI takes them.
const (
	// IngestAPI describes ingest (POST /webhooks/{provider}, /healthz,
	// /readyz, /metrics, /selftest).
	IngestAPI = "ingest.openapi.yaml"
	// DLQAPI describes `dlq serve` (the admin API, its console page and
	// /metrics).
	DLQAPI = "dlq.openapi.yaml"
)

// Unrouted is the Path of an Answer listed under the document's x-unrouted:
// what a path or method the document does not list is answered.
const Unrouted = "x-unrouted"

// Answer is one answer a document lists: a status of an operation, or of
// x-unrouted (Method "" and Path Unrouted).
type Answer struct {
	Method string
	Path   string
	Status int
}

// String is "METHOD /path STATUS", or "x-unrouted STATUS".
func (a Answer) String() string {
	if a.Path == Unrouted {
		return fmt.Sprintf("%s %d", Unrouted, a.Status)
	}
	return fmt.Sprintf("%s %s %d", a.Method, a.Path, a.Status)
}

// API is a loaded OpenAPI 3.1 document: its operations and their responses,
// with every response schema compiled (JSON Schema 2020-12, the dialect of
// OpenAPI 3.1; OpenAPI's own keywords such as example are annotations).
type API struct {
	name       string
	ops        []*operation
	unrouted   map[int]*response
	examples   []example
	components map[string]*jsonschema.Schema
}

type operation struct {
	method string
	path   string
	segs   []string
	params int // templated segments: fewer wins when two paths match
	// rest: the last segment is a path parameter marked x-rest-of-path,
	// which takes the rest of the path, "/" and empty included (gin's
	// *name): /events/{key} matches /events/github:org/repo/7.
	rest      bool
	responses map[int]*response
}

type response struct {
	where   string
	headers map[string]*jsonschema.Schema // required headers, by name as written
	content map[string]*jsonschema.Schema // media type -> schema (nil: any)
}

type example struct {
	where string
	sch   *jsonschema.Schema
	value any
}

// The documents are compiled once, on first use, and only read after that
// (like compiled in validate.go).
var (
	ingestAPI = sync.OnceValues(func() (*API, error) { return loadAPI(IngestAPI) })
	dlqAPI    = sync.OnceValues(func() (*API, error) { return loadAPI(DLQAPI) })
)

// LoadAPI returns the embedded document name (IngestAPI or DLQAPI),
// compiled. The first call per document parses and compiles it (a few
// milliseconds); later calls return the same *API, safe for concurrent use.
func LoadAPI(name string) (*API, error) {
	switch name {
	case IngestAPI:
		return ingestAPI()
	case DLQAPI:
		return dlqAPI()
	}
	return nil, fmt.Errorf("unknown OpenAPI document %q (have %s, %s)", name, IngestAPI, DLQAPI)
}

// Document returns the embedded document name (IngestAPI or DLQAPI) as
// written: for a service that serves it, or builds on it. Cost: a read of
// the embedded file.
func Document(name string) ([]byte, error) {
	if name != IngestAPI && name != DLQAPI {
		return nil, fmt.Errorf("unknown OpenAPI document %q (have %s, %s)", name, IngestAPI, DLQAPI)
	}
	return files.ReadFile(name)
}

// ParseAPI compiles an OpenAPI 3.1 document given as YAML (or JSON), such
// as the one ingest serves at GET /openapi.yaml; name is for errors. The
// same checks as LoadAPI, without the cache. Cost: a YAML parse and a
// compile of every schema (a few milliseconds).
func ParseAPI(name string, raw []byte) (*API, error) { return parseAPI(name, raw) }

func loadAPI(name string) (*API, error) {
	raw, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("openapi %s: %w", name, err)
	}
	return parseAPI(name, raw)
}

func parseAPI(name string, raw []byte) (*API, error) {
	var y any
	if err := yaml.Unmarshal(raw, &y); err != nil {
		return nil, fmt.Errorf("openapi %s: %w", name, err)
	}
	// Through JSON, so the compiler sees JSON values (json.Number, string
	// keys) whatever YAML typed.
	j, err := json.Marshal(y)
	if err != nil {
		return nil, fmt.Errorf("openapi %s: %w", name, err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, fmt.Errorf("openapi %s: %w", name, err)
	}
	root, ok := doc.(map[string]any)
	if !ok || root["openapi"] != "3.1.0" {
		return nil, fmt.Errorf("openapi %s: not an OpenAPI 3.1.0 document", name)
	}
	url := baseURL + name
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.AssertContent()
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("openapi %s: %w", name, err)
	}
	l := &loader{root: root, url: url, c: c}
	a := &API{name: name}

	paths, _ := root["paths"].(map[string]any)
	for path, item := range paths {
		methods, _ := item.(map[string]any)
		for method, op := range methods {
			if !slices.Contains([]string{"get", "put", "post", "delete", "patch", "head", "options"}, method) {
				continue
			}
			o := &operation{method: strings.ToUpper(method), path: path, segs: strings.Split(path, "/"), responses: map[int]*response{}}
			for _, s := range o.segs {
				if strings.HasPrefix(s, "{") {
					o.params++
				}
			}
			at := "/paths/" + escape(path) + "/" + method
			opm, _ := op.(map[string]any)
			if o.rest, err = l.restOfPath(opm, o.segs[len(o.segs)-1], at); err != nil {
				return nil, err
			}
			if err := l.requestExamples(opm, at); err != nil {
				return nil, err
			}
			rs, _ := opm["responses"].(map[string]any)
			if len(rs) == 0 {
				return nil, fmt.Errorf("openapi %s: %s %s lists no responses", name, o.method, path)
			}
			for code, r := range rs {
				status, err := strconv.Atoi(code)
				if err != nil {
					return nil, fmt.Errorf("openapi %s: %s %s: response %q: list each status, not ranges or default", name, o.method, path, code)
				}
				if o.responses[status], err = l.response(r, at+"/responses/"+code); err != nil {
					return nil, err
				}
			}
			a.ops = append(a.ops, o)
		}
	}
	un, _ := root[Unrouted].(map[string]any)
	urs, _ := un["responses"].(map[string]any)
	a.unrouted = map[int]*response{}
	for code, r := range urs {
		status, err := strconv.Atoi(code)
		if err != nil {
			return nil, fmt.Errorf("openapi %s: %s: response %q", name, Unrouted, code)
		}
		if a.unrouted[status], err = l.response(r, "/"+Unrouted+"/responses/"+code); err != nil {
			return nil, err
		}
	}
	a.examples = l.examples
	a.components = map[string]*jsonschema.Schema{}
	comps, _ := root["components"].(map[string]any)
	schs, _ := comps["schemas"].(map[string]any)
	for n := range schs {
		if a.components[n], err = l.schema("/components/schemas/" + escape(n)); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// loader walks one document, following local $refs of non-schema objects
// (responses, parameters, request bodies) itself and compiling schemas by
// their location.
type loader struct {
	root     map[string]any
	url      string
	c        *jsonschema.Compiler
	examples []example
}

// escape makes one JSON pointer token.
func escape(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// deref follows a {"$ref": "#/..."} object to what it names, returning it
// and its pointer; anything else is returned as it is with at.
func (l *loader) deref(v any, at string) (map[string]any, string, error) {
	for range 8 {
		m, _ := v.(map[string]any)
		ref, ok := m["$ref"].(string)
		if !ok {
			return m, at, nil
		}
		if !strings.HasPrefix(ref, "#/") {
			return nil, "", fmt.Errorf("openapi: %s: only local $refs are followed, got %q", at, ref)
		}
		at = ref[1:]
		var cur any = l.root
		for _, tok := range strings.Split(ref[2:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			cm, _ := cur.(map[string]any)
			if cur = cm[tok]; cur == nil {
				return nil, "", fmt.Errorf("openapi: $ref %q names nothing", ref)
			}
		}
		v = cur
	}
	return nil, "", fmt.Errorf("openapi: %s: $ref chain too long", at)
}

func (l *loader) schema(at string) (*jsonschema.Schema, error) {
	// The fragment is a JSON pointer inside a URI: percent-encode what a
	// fragment may not hold ({ } in path templates, spaces).
	sch, err := l.c.Compile(l.url + "#" + (&url.URL{Fragment: at}).EscapedFragment())
	if err != nil {
		return nil, fmt.Errorf("openapi: compile %s: %w", at, err)
	}
	return sch, nil
}

// media compiles a content map's schemas and collects its examples.
func (l *loader) media(content map[string]any, at string) (map[string]*jsonschema.Schema, error) {
	out := map[string]*jsonschema.Schema{}
	for mt, v := range content {
		mat := at + "/content/" + escape(mt)
		mm, _ := v.(map[string]any)
		var sch *jsonschema.Schema
		if _, ok := mm["schema"]; ok {
			var err error
			if sch, err = l.schema(mat + "/schema"); err != nil {
				return nil, err
			}
		}
		out[mt] = sch
		exs, _ := mm["examples"].(map[string]any)
		for n, ex := range exs {
			em, eat, err := l.deref(ex, mat+"/examples/"+escape(n))
			if err != nil {
				return nil, err
			}
			val, ok := em["value"]
			if !ok {
				return nil, fmt.Errorf("openapi: %s has no value", eat)
			}
			if sch == nil {
				return nil, fmt.Errorf("openapi: %s: an example without a schema to check it against", eat)
			}
			l.examples = append(l.examples, example{where: eat, sch: sch, value: val})
		}
		if ex, ok := mm["example"]; ok && sch != nil {
			l.examples = append(l.examples, example{where: mat + "/example", sch: sch, value: ex})
		}
	}
	return out, nil
}

// restOfPath says whether last, the path's last segment, is a path
// parameter of op marked `x-rest-of-path: true`. A marked parameter
// anywhere else is an error: only the last segment can take the rest.
func (l *loader) restOfPath(op map[string]any, last, at string) (bool, error) {
	ps, _ := op["parameters"].([]any)
	for i, p := range ps {
		pm, pat, err := l.deref(p, fmt.Sprintf("%s/parameters/%d", at, i))
		if err != nil {
			return false, err
		}
		if rest, _ := pm["x-rest-of-path"].(bool); !rest {
			continue
		}
		if pm["in"] != "path" || last != "{"+fmt.Sprint(pm["name"])+"}" {
			return false, fmt.Errorf("openapi: %s: x-rest-of-path on a parameter that is not the path's last segment", pat)
		}
		return true, nil
	}
	return false, nil
}

func (l *loader) requestExamples(op map[string]any, at string) error {
	rb, ok := op["requestBody"]
	if !ok {
		return nil
	}
	m, mat, err := l.deref(rb, at+"/requestBody")
	if err != nil {
		return err
	}
	content, _ := m["content"].(map[string]any)
	_, err = l.media(content, mat)
	return err
}

func (l *loader) response(v any, at string) (*response, error) {
	m, rat, err := l.deref(v, at)
	if err != nil {
		return nil, err
	}
	if _, ok := m["description"].(string); !ok {
		return nil, fmt.Errorf("openapi: %s has no description", rat)
	}
	r := &response{where: at, headers: map[string]*jsonschema.Schema{}}
	hs, _ := m["headers"].(map[string]any)
	for name, h := range hs {
		hm, hat, err := l.deref(h, rat+"/headers/"+escape(name))
		if err != nil {
			return nil, err
		}
		if req, _ := hm["required"].(bool); !req {
			continue
		}
		sch, err := l.schema(hat + "/schema")
		if err != nil {
			return nil, err
		}
		r.headers[name] = sch
	}
	content, _ := m["content"].(map[string]any)
	if r.content, err = l.media(content, rat); err != nil {
		return nil, err
	}
	return r, nil
}

// Answers lists every answer the document describes, sorted.
func (a *API) Answers() []Answer {
	var out []Answer
	for _, o := range a.ops {
		for s := range o.responses {
			out = append(out, Answer{Method: o.method, Path: o.path, Status: s})
		}
	}
	for s := range a.unrouted {
		out = append(out, Answer{Path: Unrouted, Status: s})
	}
	slices.SortFunc(out, func(x, y Answer) int {
		return strings.Compare(fmt.Sprintf("%s %s %03d", x.Path, x.Method, x.Status), fmt.Sprintf("%s %s %03d", y.Path, y.Method, y.Status))
	})
	return out
}

// CheckExamples validates every example of the document (request bodies
// and responses) against the schema beside it.
func (a *API) CheckExamples() error {
	var errs []error
	for _, ex := range a.examples {
		if err := ex.sch.Validate(ex.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: example %s: %w", a.name, ex.where, err))
		}
	}
	if len(a.examples) == 0 {
		errs = append(errs, fmt.Errorf("%s: no examples", a.name))
	}
	return errors.Join(errs...)
}

// Route returns the operation the document lists for method and path (a
// request path, such as /dlq/3:17): a path without templates wins over one
// with them, as OpenAPI says. A template marked x-rest-of-path takes the
// rest of the path, slashes included. ok is false when the document lists none.
func (a *API) route(method, path string) (*operation, bool) {
	segs := strings.Split(path, "/")
	var best *operation
	for _, o := range a.ops {
		if o.method != method || len(o.segs) != len(segs) && (!o.rest || len(segs) < len(o.segs)) {
			continue
		}
		match := true
		for i, s := range o.segs {
			if o.rest && i == len(o.segs)-1 {
				break // the rest of the path, whatever it is
			}
			if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
				if segs[i] == "" {
					match = false
				}
			} else if s != segs[i] {
				match = false
			}
			if !match {
				break
			}
		}
		if match && (best == nil || o.params < best.params) {
			best = o
		}
	}
	return best, best != nil
}

// Check says whether an answer (status, headers, body) to a request (method,
// path: the URL's path, unescaped) is one the document describes: the
// status is listed for that operation (or under x-unrouted when the
// document lists no such operation), every required header is there and
// matches its schema, the Content-Type is one the response lists (no body
// when it lists none), and a JSON body validates against its schema. It
// returns which Answer it was, for the caller's coverage count.
func (a *API) Check(method, path string, status int, h http.Header, body []byte) (Answer, error) {
	var (
		ans Answer
		r   *response
	)
	if o, ok := a.route(method, path); ok {
		ans = Answer{Method: o.method, Path: o.path, Status: status}
		r = o.responses[status]
	} else {
		ans = Answer{Path: Unrouted, Status: status}
		r = a.unrouted[status]
	}
	if r == nil {
		return ans, fmt.Errorf("%s: %s %s answered %d, which the document does not list (%s)", a.name, method, path, status, ans)
	}
	var errs []error
	for name, sch := range r.headers {
		vs := h.Values(name)
		if len(vs) == 0 {
			errs = append(errs, fmt.Errorf("header %s is required (%s)", name, r.where))
			continue
		}
		if err := sch.Validate(vs[0]); err != nil {
			errs = append(errs, fmt.Errorf("header %s %q: %w", name, vs[0], err))
		}
	}
	ct := h.Get("Content-Type")
	switch {
	case len(r.content) == 0:
		if len(body) > 0 {
			errs = append(errs, fmt.Errorf("a body (%s, %d bytes) where %s lists none", ct, len(body), r.where))
		}
	case ct == "":
		errs = append(errs, fmt.Errorf("no Content-Type; %s lists %v", r.where, mediaTypes(r.content)))
	default:
		mt, _, err := mime.ParseMediaType(ct)
		sch, listed := r.content[strings.ToLower(mt)]
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("Content-Type %q: %w", ct, err))
		case !listed:
			errs = append(errs, fmt.Errorf("Content-Type %q; %s lists %v", ct, r.where, mediaTypes(r.content)))
		case sch == nil, method == http.MethodHead: // a HEAD answer has no body
		case mt == "application/json", mt == "application/yaml":
			v, err := decodeBody(mt, body)
			if err != nil {
				kind := map[string]string{"application/json": "JSON", "application/yaml": "YAML"}[mt]
				errs = append(errs, fmt.Errorf("body is not %s: %w: %q", kind, err, body))
				break
			}
			if err := sch.Validate(v); err != nil {
				errs = append(errs, fmt.Errorf("body %s: %w", body, err))
			}
		default:
			if err := sch.Validate(string(body)); err != nil {
				errs = append(errs, fmt.Errorf("body: %w", err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ans, fmt.Errorf("%s: %s %s answered %d: %w", a.name, method, path, status, err)
	}
	return ans, nil
}

// decodeBody reads a JSON or YAML body as the values the schemas
// validate (YAML through JSON, as loadAPI reads the documents).
func decodeBody(mt string, body []byte) (any, error) {
	if mt == "application/yaml" {
		var y any
		if err := yaml.Unmarshal(body, &y); err != nil {
			return nil, err
		}
		j, err := json.Marshal(y)
		if err != nil {
			return nil, err
		}
		body = j
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(body))
}

func mediaTypes(m map[string]*jsonschema.Schema) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// ValidateComponent checks the JSON document doc against the schema
// components/schemas/<name> of the document.
func (a *API) ValidateComponent(name string, doc []byte) error {
	sch, ok := a.components[name]
	if !ok {
		return fmt.Errorf("%s: no schema %q in components", a.name, name)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("%s: not JSON: %w", name, err)
	}
	return sch.Validate(v)
}

// Coverage checks answers against a document and counts which of its
// answers were seen, so a test can require that each was produced. Safe for
// concurrent use.
type Coverage struct {
	api  *API
	mu   sync.Mutex
	seen map[Answer]int
}

// NewCoverage starts a count over a.
func (a *API) NewCoverage() *Coverage { return &Coverage{api: a, seen: map[Answer]int{}} }

// Check is API.Check, counting the answer when it conforms.
func (c *Coverage) Check(method, path string, status int, h http.Header, body []byte) error {
	ans, err := c.api.Check(method, path, status, h, body)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.seen[ans]++
	c.mu.Unlock()
	return nil
}

// Missing lists the document's answers no conforming answer was counted for.
func (c *Coverage) Missing() []Answer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Answer
	for _, a := range c.api.Answers() {
		if c.seen[a] == 0 {
			out = append(out, a)
		}
	}
	return out
}

// Seen is how many conforming answers were counted, in all.
func (c *Coverage) Seen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, k := range c.seen {
		n += k
	}
	return n
}
