package headers

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxEventTypeBytes bounds an event type: what a provider's body or header
// names it (a Stripe "invoice.paid", a GitHub "push"). The type travels in
// the headers of every record of its delivery and in each outcome, so a
// provider that sent 655,000 characters made every one of them outgrow its
// topic (issue 25).
const MaxEventTypeBytes = 256

// CheckEventType says why s cannot be an event type: longer than
// MaxEventTypeBytes, not UTF-8, or holding a control or other non-printable
// character (a "\r\n" in a type reached the DLQ's table and the terminal).
// The empty type is allowed: many deliveries have none.
func CheckEventType(s string) error {
	if len(s) > MaxEventTypeBytes {
		return fmt.Errorf("event type is %d bytes, over the limit of %d", len(s), MaxEventTypeBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("event type is not UTF-8")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
		return fmt.Errorf("event type has a non-printable character (%q) at byte %d", s[i:i+utf8.RuneLen([]rune(s[i:])[0])], i)
	}
	return nil
}

// CutEventType cuts an event type to MaxEventTypeBytes (valid UTF-8, cut
// at a rune start), for records written before ingest checked types.
func CutEventType(s string) string { return truncate(s, MaxEventTypeBytes) }

// HeadersCut names, comma-separated, the headers Fit cut to make a record
// fit its topic; their first CutHeaderBytes bytes are kept.
const HeadersCut = "hookline.headers-cut"

// CutHeaderBytes is what Fit keeps of a header it cuts.
const CutHeaderBytes = 256

// recordOverhead is more than a record's own framing in a batch (varints
// of lengths, offsets and timestamps) and the batch header of a batch of
// one: Size errs on the safe side.
const recordOverhead = 128

// Size is an upper bound of what r takes in a record batch, as a topic's
// max.message.bytes counts it (uncompressed).
func Size(r *kgo.Record) int {
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// Fit makes r at most limit bytes (Size) by cutting its longest header
// values, longest first, to CutHeaderBytes each, and naming them in
// HeadersCut; the key and the body are never changed. It reports whether r
// now fits; a record whose key and body alone are over limit cannot. With
// limit 0 every header over CutHeaderBytes is cut.
func Fit(r *kgo.Record, limit int) bool {
	if Size(r) <= limit {
		return true
	}
	order := make([]int, 0, len(r.Headers))
	for i, h := range r.Headers {
		if len(h.Value) > CutHeaderBytes && h.Key != HeadersCut {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(r.Headers[b].Value), len(r.Headers[a].Value)) })
	var cut []string
	if prev, ok := Get(r, HeadersCut); ok && prev != "" {
		cut = strings.Split(prev, ",")
	}
	for _, i := range order {
		if Size(r) <= limit {
			break
		}
		h := &r.Headers[i]
		h.Value = []byte(truncate(string(h.Value), CutHeaderBytes))
		if !slices.Contains(cut, h.Key) {
			cut = append(cut, h.Key)
		}
	}
	if len(cut) > 0 {
		Set(r, HeadersCut, strings.Join(cut, ","))
	}
	return Size(r) <= limit
}
