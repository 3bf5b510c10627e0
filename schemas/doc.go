// Package schemas holds the JSON Schemas (draft 2020-12) of hookline's JSON
// values and of its header set (DESIGN §2, §3): state (webhooks.dedup-changelog),
// outcome (webhooks.outcomes), dlq-status (webhooks.dlq-status), headers (the
// record headers as a name -> value object) and errors (the hookline.errors
// header). defs.schema.json holds what they share.
//
// The schema files are embedded, so tests anywhere in the module validate real
// records read from Kafka against the same files that document the contract:
// Validate for a JSON value, ValidateHeaders for a record's headers. Each
// schema has valid examples in examples/<name>/ and invalid ones in
// examples/<name>/invalid/, checked by this package's test.
//
// ingest.openapi.yaml and dlq.openapi.yaml are the OpenAPI 3.1 documents of
// the HTTP surfaces (ingest, `dlq serve`). LoadAPI compiles one with the same
// JSON Schema library (OpenAPI 3.1 schemas are JSON Schema 2020-12), and
// API.Check says whether an answer is one the document describes; Coverage
// counts which of its answers a test produced. The schemathesis folder runs
// that outside fuzzer against the real services.
package schemas
