package consume

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/processor/internal/decide"
)

// invalidPayload says why a record's body failed its provider's schema
// (providers file schema:), nil for any other: the plan calls it on no
// route, and it goes to the DLQ as invalid_payload (decide.ResultInvalid).
//
// A fresh ingest record of a provider with on_invalid: dlq (the default)
// is checked here: ingest accepts such a delivery whatever its body, so
// it leaves the check to the processor rather than spend its own request
// path on it. A fresh record that carries hookline.invalid-payload (an
// ingest of an earlier version checked it) keeps that verdict, and nothing
// is parsed. A provider with on_invalid: reject had its bodies checked by
// ingest, which refused the invalid ones: its records are not checked
// again. A replay or a backfill is checked here, against this processor's
// providers file, whatever header it carries: so a replay after the
// schema (or the provider) was fixed is delivered, and an invalid one
// replayed by hand (kcat) is dead-lettered again. A retry or a lane copy
// was valid when it was first decided. Cost: a header scan; for a fresh
// record of a provider with a schema and on_invalid: dlq, and for a
// replay of a provider with a schema, one parse and validation of the
// body.
func (p *setup) invalidPayload(r *kgo.Record, a decide.Arrival) *decide.InvalidPayloadError {
	if a.FromLane {
		return nil
	}
	switch a.Origin {
	case headers.OriginIngest:
		if why, ok := headers.Get(r, headers.InvalidPayload); ok {
			return &decide.InvalidPayloadError{Reason: why}
		}
		pr, ok := p.cfg.Providers.Get(a.Provider)
		if !ok || !pr.HasSchema() || pr.RejectsInvalid() {
			return nil
		}
		return checkPayload(pr, r)
	case headers.OriginReplay, headers.OriginBackfill:
		pr, ok := p.cfg.Providers.Get(a.Provider)
		if !ok {
			return nil
		}
		return checkPayload(pr, r)
	}
	return nil
}

// checkPayload checks r's body against its provider's schema for its
// event type: the reason it is invalid, nil when it is valid.
func checkPayload(pr *providers.Provider, r *kgo.Record) *decide.InvalidPayloadError {
	if err := pr.CheckPayload(headers.Value(r, headers.EventType), r.Value); err != nil {
		return &decide.InvalidPayloadError{Reason: err.Error()}
	}
	return nil
}
