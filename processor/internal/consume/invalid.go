package consume

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
	"github.com/hookline/hookline/processor/internal/decide"
)

// invalidPayload says why a record's body failed its provider's schema
// (providers file schema:), nil for any other: the plan calls it on no
// route, and it goes to the DLQ as invalid_payload (decide.ResultInvalid).
//
// A fresh ingest record carries ingest's verdict (hookline.invalid-payload,
// written with on_invalid: dlq): the processor trusts it and parses
// nothing. A replay or a backfill is checked here, against this processor's providers
// file, whatever header it carries: so a replay after the schema (or the
// provider) was fixed is delivered, and an invalid one replayed by hand
// (kcat) is dead-lettered again. A retry or a lane copy was valid when it
// was first decided. Cost: a header scan; for a replay of a provider with
// a schema, one parse and validation of the body.
func (p *setup) invalidPayload(r *kgo.Record, a decide.Arrival) *decide.InvalidPayloadError {
	if a.FromLane {
		return nil
	}
	switch a.Origin {
	case headers.OriginIngest:
		if why, ok := headers.Get(r, headers.InvalidPayload); ok {
			return &decide.InvalidPayloadError{Reason: why}
		}
	case headers.OriginReplay, headers.OriginBackfill:
		pr, ok := p.cfg.Providers.Get(a.Provider)
		if !ok {
			return nil
		}
		if err := pr.CheckPayload(headers.Value(r, headers.EventType), r.Value); err != nil {
			return &decide.InvalidPayloadError{Reason: err.Error()}
		}
	}
	return nil
}
