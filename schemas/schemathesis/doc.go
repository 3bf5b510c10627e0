// Package schemathesis runs schemathesis, an outside property-based API
// fuzzer, against the real ingest and the real `dlq serve` (with its token),
// started against the broker at KAFKA_BROKERS: ingest against the document
// it serves at GET /openapi.yaml (a path per provider of its providers
// file) with schemathesis' default checks, `dlq serve` against
// schemas/dlq.openapi.yaml. It has only a test: no 5xx, every answer
// conforms to the document (schemathesis' checks and schemas.API.Check on
// every recorded exchange), and nothing is produced to Kafka by a refused
// request.
package schemathesis
