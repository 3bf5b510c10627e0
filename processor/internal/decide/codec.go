package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// stateVersion is the "v" of the changelog value; Decode rejects any other.
const stateVersion = 1

// stateJSON is the changelog value (schemas/state.schema.json).
type stateJSON struct {
	V           int      `json:"v"`
	Status      Status   `json:"status"`
	NextAttempt int      `json:"next_attempt,omitempty"`
	Provider    string   `json:"provider"`
	FirstSeenAt string   `json:"first_seen_at"`
	UpdatedAt   string   `json:"updated_at"`
	ExpiresAt   string   `json:"expires_at"`
	ReplayIDs   []string `json:"replay_ids,omitempty"`
}

// Encode renders st as the changelog value: JSON with snake_case fields, a
// "v":1 version, times in RFC 3339 UTC with milliseconds (headers.TimeLayout).
// It refuses a state Decode would refuse, so nothing unreadable reaches the
// changelog.
func Encode(st State) ([]byte, error) {
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	return json.Marshal(stateJSON{
		V:           stateVersion,
		Status:      st.Status,
		NextAttempt: st.NextAttempt,
		Provider:    st.Provider,
		FirstSeenAt: headers.FormatTime(st.FirstSeenAt),
		UpdatedAt:   headers.FormatTime(st.UpdatedAt),
		ExpiresAt:   headers.FormatTime(st.ExpiresAt),
		ReplayIDs:   st.ReplayIDs,
	})
}

// Decode reads a changelog value written by Encode. It rejects another
// version, an unknown status, a retrying state without its next attempt, an
// empty provider, and missing or malformed times; unknown fields are
// ignored. A tombstone (nil value) is no state: handle it before calling
// Decode.
func Decode(b []byte) (State, error) {
	var j stateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return State{}, fmt.Errorf("decode state: %w", err)
	}
	if j.V != stateVersion {
		return State{}, fmt.Errorf("decode state: version %d, want %d", j.V, stateVersion)
	}
	st := State{Status: j.Status, NextAttempt: j.NextAttempt, Provider: j.Provider, ReplayIDs: j.ReplayIDs}
	var errs []error
	for _, f := range []struct {
		name string
		in   string
		out  *time.Time
	}{
		{"first_seen_at", j.FirstSeenAt, &st.FirstSeenAt},
		{"updated_at", j.UpdatedAt, &st.UpdatedAt},
		{"expires_at", j.ExpiresAt, &st.ExpiresAt},
	} {
		t, err := headers.ParseTime(f.in)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.name, err))
		}
		*f.out = t
	}
	if err := errors.Join(append(errs, st.check())...); err != nil {
		return State{}, fmt.Errorf("decode state: %w", err)
	}
	return st, nil
}

// check is what Encode and Decode both require of a state.
func (s State) check() error {
	switch s.Status {
	case StatusDone, StatusDead, StatusRetrying, StatusParked:
	default:
		return fmt.Errorf("unknown status %q (want done, retrying, parked or dead)", s.Status)
	}
	if s.Provider == "" {
		return errors.New("provider is empty")
	}
	// Retrying usually expects attempt 2 or later; attempt 1 when the first
	// call was never made (the destination's circuit was open).
	waits := s.Status == StatusRetrying || s.Status == StatusParked
	if waits && s.NextAttempt < 1 || !waits && s.NextAttempt != 0 {
		return fmt.Errorf("status %s with next_attempt %d (retrying and parked expect attempt 1 or later, other statuses none)", s.Status, s.NextAttempt)
	}
	if len(s.ReplayIDs) > MaxReplayIDs {
		return fmt.Errorf("%d replay ids, at most %d", len(s.ReplayIDs), MaxReplayIDs)
	}
	return nil
}
