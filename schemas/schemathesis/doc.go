// Package schemathesis runs schemathesis, an outside property-based API
// fuzzer, against the real ingest and the real `dlq serve` (with its token),
// started against the broker at KAFKA_BROKERS, using the OpenAPI documents
// in schemas/. It has only a test: no 5xx, every answer conforms to the
// document (schemathesis' checks and schemas.API.Check on every recorded
// exchange), and nothing is produced to Kafka by a refused request.
package schemathesis
