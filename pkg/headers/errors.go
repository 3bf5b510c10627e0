package headers

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxErrorBytes bounds one error message in the hookline.errors history.
const MaxErrorBytes = 1024

// ErrorEntry is one failed attempt in the hookline.errors header.
type ErrorEntry struct {
	Attempt   int       `json:"attempt"`
	At        time.Time `json:"at"`
	Error     string    `json:"error"`
	Retryable bool      `json:"retryable"`
}

// GetErrors decodes the error history, oldest first. An absent header is an
// empty history, not an error.
func GetErrors(r *kgo.Record) ([]ErrorEntry, error) {
	v, ok := Get(r, Errors)
	if !ok || v == "" {
		return nil, nil
	}
	var es []ErrorEntry
	if err := json.Unmarshal([]byte(v), &es); err != nil {
		return nil, fmt.Errorf("%s: %w", Errors, err)
	}
	return es, nil
}

// SetErrors encodes the history into the hookline.errors header, cutting each
// message to MaxErrorBytes (on a rune boundary).
func SetErrors(r *kgo.Record, es []ErrorEntry) {
	cut := make([]ErrorEntry, len(es))
	for i, e := range es {
		e.Error = truncate(e.Error, MaxErrorBytes)
		e.At = e.At.UTC().Truncate(time.Millisecond)
		cut[i] = e
	}
	b, _ := json.Marshal(cut) // cannot fail: plain fields only
	Set(r, Errors, string(b))
}

// CutError makes an error message fit the history: valid UTF-8 (each
// invalid byte becomes U+FFFD, so JSON encoding cannot grow it), at most
// MaxErrorBytes, cut at a rune start.
func CutError(s string) string { return truncate(s, MaxErrorBytes) }

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// MarshalJSON writes At in TimeLayout, like every other hookline time.
func (e ErrorEntry) MarshalJSON() ([]byte, error) {
	type plain ErrorEntry
	return json.Marshal(struct {
		plain
		At string `json:"at"`
	}{plain(e), FormatTime(e.At)})
}
