package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// Resolutions (schemas/dlq-status.schema.json).
const (
	// Replayed: re-produced to webhooks.raw by dlq replay. Written by the
	// tool after the broker acknowledged the replay, never by hand.
	Replayed = "replayed"
	// Ignored: an operator decided it must not be processed.
	Ignored = "ignored"
	// ManualFix: handled outside hookline.
	ManualFix = "manual_fix"
)

// Resolution is how an operator resolved one DLQ record: the value of a
// record on webhooks.dlq-status, keyed by the ref. The latest one per ref
// wins (the topic is compacted).
type Resolution struct {
	Ref        string    `json:"ref"`
	Resolution string    `json:"resolution"`
	Note       string    `json:"note"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
	// ReplayID is dlq:<ref>, set when Resolution is Replayed only.
	ReplayID string `json:"replay_id,omitempty"`
}

// NewResolution builds a resolution of ref, checking what the schema
// requires: a known resolution, a non-empty by, a replay id exactly for a
// replay.
func NewResolution(ref Ref, resolution, note, by string, at time.Time) (Resolution, error) {
	r := Resolution{Ref: ref.String(), Resolution: resolution, Note: note, By: strings.TrimSpace(by), At: at.UTC().Truncate(time.Millisecond)}
	switch resolution {
	case Replayed:
		r.ReplayID = ref.ReplayID()
	case Ignored, ManualFix:
	default:
		return Resolution{}, fmt.Errorf("resolution %q: want ignored or manual_fix", resolution)
	}
	if r.By == "" {
		return Resolution{}, fmt.Errorf("resolution of %s: who resolved it is empty (set --by or $USER)", ref)
	}
	return r, nil
}

// MarshalJSON writes At in headers.TimeLayout, like every hookline time.
func (r Resolution) MarshalJSON() ([]byte, error) {
	type plain Resolution
	return json.Marshal(struct {
		plain
		At string `json:"at"`
	}{plain(r), headers.FormatTime(r.At)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Resolution) UnmarshalJSON(b []byte) error {
	type plain Resolution
	var v struct {
		plain
		At string `json:"at"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	at, err := headers.ParseTime(v.At)
	if err != nil {
		return fmt.Errorf("at: %w", err)
	}
	*r = Resolution(v.plain)
	r.At = at
	return nil
}
