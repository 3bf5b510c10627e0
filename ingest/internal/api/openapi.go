package api

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/retry"
	"github.com/hookline/hookline/schemas"
)

// webhookTemplate is the path of schemas/ingest.openapi.yaml that stands
// for every provider, and which the served document replaces.
const webhookTemplate = "/webhooks/{provider}"

// anyMediaType is the media type listed for a provider that takes any
// Content-Type (standard, and a generic provider reading nothing from the
// body).
const anyMediaType = "*/*"

// openAPIDocument is what GET /openapi.yaml serves: schemas/ingest.openapi.yaml
// with POST /webhooks/{provider} replaced by POST /webhooks/<name> for each
// provider of reg, in name order, each listing exactly the content types
// its preset takes, its signature, key and event-type headers, and only
// the answers it can give: 200 for slack's challenge alone, 401 for a
// signed provider, 422 for one with schema: and on_invalid: reject, 429 where the provider's rate_limit or the per-address
// limit (ipLimit) applies, and no 404 (the provider exists). x-unrouted's
// 404 then also names unknown_provider, for a name the file lacks. Cost: a
// parse of the embedded document and an encode of the result, once at
// start.
func openAPIDocument(reg *providers.Registry, ipLimit bool) ([]byte, error) {
	raw, err := schemas.Document(schemas.IngestAPI)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	root := doc.Content[0]
	paths := get(root, "paths")
	i := keyIndex(paths, webhookTemplate)
	if i < 0 {
		return nil, fmt.Errorf("openapi: %s has no path %s", schemas.IngestAPI, webhookTemplate)
	}
	tmpl := get(paths.Content[i+1], "post")
	var items []*yaml.Node
	for _, name := range reg.Names() {
		p, _ := reg.Get(name)
		op, err := providerOperation(tmpl, p, ipLimit)
		if err != nil {
			return nil, fmt.Errorf("openapi: provider %s: %w", name, err)
		}
		items = append(items, scalar("/webhooks/"+name), mapping("post", op))
	}
	paths.Content = slices.Replace(paths.Content, i, i+2, items...)

	schema := get(get(get(get(get(get(get(root, "x-unrouted"), "responses"), "404"), "content"), "application/json"), "schema"), "allOf")
	if schema == nil || len(schema.Content) != 2 {
		return nil, fmt.Errorf("openapi: x-unrouted 404 is not allOf [Error, {error: not_found}]")
	}
	if err := schema.Content[1].Encode(map[string]any{"properties": map[string]any{"error": map[string]any{"enum": []string{CodeNotFound, CodeUnknownProvider}}}}); err != nil {
		return nil, err
	}
	desc := get(get(get(root, "x-unrouted"), "responses"), "404")
	set(desc, "description", "`not_found`: no such path; `unknown_provider`: POST /webhooks/<name> for a name the providers file lacks.")

	info := get(root, "info")
	set(info, "description", strings.TrimRight(get(info, "description").Value, "\n")+"\n\n"+
		"This document is the one this ingest serves at `GET /openapi.yaml`, generated at start from its providers file "+
		"(`HOOKLINE_PROVIDERS`): a path per provider, `/webhooks/<name>`, with the content types, headers and answers of that provider.\n")
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return out.Bytes(), nil
}

// providerOperation is the template operation made into p's own.
func providerOperation(tmpl *yaml.Node, p *providers.Provider, ipLimit bool) (*yaml.Node, error) {
	op := clone(tmpl)
	set(op, "operationId", "receiveWebhook_"+p.Name)
	set(op, "summary", fmt.Sprintf("Receive one webhook delivery from %s (preset %s)", p.Name, p.Preset))
	// The template's second paragraph is the order of the checks, which
	// holds for every provider.
	paras := strings.Split(get(op, "description").Value, "\n\n")
	if len(paras) < 2 || !strings.HasPrefix(paras[1], "The checks run in this order") {
		return nil, fmt.Errorf("the template's description has no paragraph on the order of the checks")
	}
	set(op, "description", providerDescription(p)+"\n\n"+strings.TrimRight(paras[1], "\n")+"\n")

	params := get(op, "parameters")
	if params == nil {
		return nil, fmt.Errorf("the template has no parameters")
	}
	params.Content = slices.DeleteFunc(params.Content, func(n *yaml.Node) bool { return get(n, "in").Value == "path" })
	for _, h := range p.RequestHeaders() {
		schema := map[string]any{"type": "string"}
		if h.Required {
			schema["minLength"] = 1 // an empty value is refused as a missing one
		}
		var n yaml.Node
		if err := n.Encode(struct {
			Name        string         `yaml:"name"`
			In          string         `yaml:"in"`
			Required    bool           `yaml:"required"`
			Description string         `yaml:"description"`
			Schema      map[string]any `yaml:"schema"`
		}{h.Name, "header", h.Required, h.Description, schema}); err != nil {
			return nil, err
		}
		params.Content = append(params.Content, &n)
	}

	body := get(op, "requestBody")
	content := get(body, "content")
	if content == nil {
		return nil, fmt.Errorf("the template has no request body")
	}
	first, _, _ := strings.Cut(get(body, "description").Value, ". ")
	set(body, "description", first+"; of a type listed here.")
	content.Content = nil
	types := p.ContentTypes()
	if types == nil {
		types = []string{anyMediaType}
	}
	for _, mt := range types {
		schema := map[string]any{}
		if mt == "application/x-www-form-urlencoded" {
			schema["type"] = "object" // name=value pairs
		}
		var n yaml.Node
		if err := n.Encode(map[string]any{"schema": schema}); err != nil {
			return nil, err
		}
		content.Content = append(content.Content, scalar(mt), &n)
	}

	responses := get(op, "responses")
	drop := []string{"404"} // the provider exists
	if p.Preset != providers.PresetSlack {
		drop = append(drop, "200") // only slack's url_verification
	}
	if !p.Signed() {
		drop = append(drop, "401")
	}
	if p.ContentTypes() == nil {
		drop = append(drop, "415") // any type, or none, passes
	}
	if p.RateLimit == nil && !ipLimit {
		drop = append(drop, "429")
	}
	if !p.RejectsInvalid() {
		drop = append(drop, "422") // no schema, or on_invalid: dlq: accepted
	}
	for _, code := range drop {
		if j := keyIndex(responses, code); j >= 0 {
			responses.Content = slices.Delete(responses.Content, j, j+2)
		}
	}
	return op, nil
}

// providerDescription is the paragraph that says what p takes.
func providerDescription(p *providers.Provider) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Provider `%s` of the providers file, preset `%s`. ", p.Name, p.Preset)
	if types := p.ContentTypes(); types == nil {
		b.WriteString("Takes a body of any Content-Type. ")
	} else {
		fmt.Fprintf(&b, "Takes %s only (415 otherwise). ", strings.Join(types, ", "))
	}
	var sig []string
	for _, h := range p.RequestHeaders() {
		if h.Required {
			sig = append(sig, h.Name)
		}
	}
	if !p.Signed() {
		b.WriteString("Unsigned (signature: none): no delivery is refused 401. ")
	}
	if len(sig) > 0 {
		fmt.Fprintf(&b, "Requires the header %s. ", strings.Join(sig, ", "))
	}
	switch {
	case p.RecognisesReplays():
		if w := p.ReplayWindow(); w > 0 {
			fmt.Fprintf(&b, "Signed content accepted within its replay_window (%s) is answered 202 without producing: `duplicate` under the same key, `replay` (suppressed, `replay_of` names the first key) under another.", retry.TierName(w))
		} else {
			b.WriteString("replay_window: 0: signed content accepted before is produced again; the processor's dedup by key drops re-sends under one key.")
		}
	case p.Signed():
		b.WriteString("Its signature covers a timestamp and every header the key is read from: a replay outside the tolerance is refused 401.")
	}
	switch {
	case p.RejectsInvalid():
		b.WriteString(" A body that fails its event type's JSON Schema (schema: in the providers file) is refused 422 `invalid_payload`.")
	case p.HasSchema():
		b.WriteString(" A body that fails its event type's JSON Schema (schema: in the providers file) is accepted, and goes to the DLQ as `invalid_payload` without a call.")
	}
	if p.RateLimit != nil {
		fmt.Fprintf(&b, " Rate limit %g a second, burst %d (429 beyond).", p.RateLimit.PerSecond, p.RateLimit.Burst)
	}
	return b.String()
}

// get returns the value of key in mapping n; nil when n is nil or lacks it.
func get(n *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(n, key); i >= 0 {
		return n.Content[i+1]
	}
	return nil
}

// keyIndex is the index of key's node in mapping n's Content, or -1.
func keyIndex(n *yaml.Node, key string) int {
	if n == nil || n.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// set replaces the string value of key in mapping n, or adds it.
func set(n *yaml.Node, key, value string) {
	v := scalar(value)
	if strings.Contains(value, "\n") {
		v.Style = yaml.LiteralStyle
	}
	if i := keyIndex(n, key); i >= 0 {
		n.Content[i+1] = v
		return
	}
	n.Content = append(n.Content, scalar(key), v)
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func mapping(key string, v *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{scalar(key), v}}
}

// clone copies n deeply, so that each provider's operation is its own.
func clone(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = clone(k)
	}
	return &c
}
