package schema

import "github.com/santhosh-tekuri/jsonschema/v6"

// Format assertion. JSON Schema's format is an annotation from draft
// 2019-09 on (a validator may check it only when asked), and the common
// validators do not check it for any draft unless asked; the library
// checks it for draft-07 and earlier whatever it is told, and its
// uri-template check refuses RFC 6570 templates (GitHub's schema marks
// every *_url template so, and its payloads are full of them). So by
// default every format the library knows is registered as checking
// nothing; a provider's schema_formats: assert asks for the library's
// checks instead, for every draft.

// Formats values (the providers file's schema_formats).
const (
	FormatsAnnotate = "annotate"
	FormatsAssert   = "assert"
)

// formatNames are the formats the library checks (its own list: every
// format of drafts 4 to 2020-12 that it implements, and period and
// semver). "regex" is missing: the library checks it for draft-07 and
// earlier and takes no replacement.
var formatNames = []string{
	"date-time", "date", "time", "duration", "period",
	"email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6",
	"uri", "uri-reference", "iri", "iri-reference", "uri-template",
	"uuid", "json-pointer", "relative-json-pointer", "semver",
}

// annotateFormats makes c check no format.
func annotateFormats(c *jsonschema.Compiler) {
	for _, n := range formatNames {
		c.RegisterFormat(&jsonschema.Format{Name: n, Validate: func(any) error { return nil }})
	}
}
