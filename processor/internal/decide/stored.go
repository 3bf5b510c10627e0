package decide

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// The stored form of a state is what the processor keeps in Badger: a fixed
// binary layout, about 30 bytes against 200 of the changelog's JSON, and read
// without a JSON parse. The changelog keeps the JSON of Encode (the
// contract); only the local cache changes form.
//
//	byte 0      storedVersion (1); JSON always starts with '{'
//	byte 1      status: 1 done, 2 retrying, 3 dead, 4 parked
//	uvarint     next attempt
//	uvarint     length of the provider, then its bytes
//	3 x varint  first seen, updated, expires: Unix milliseconds
//	uvarint     replay ids, then each as uvarint length and bytes
//
// A state with routes (State.Routes not nil) starts with storedVersionRoutes
// (2) and carries, after the fields above, its routes: a uvarint count,
// then per route its name (uvarint length and bytes), status byte, next
// attempt (uvarint), expiry (varint Unix milliseconds) and replay ids (as
// above). A state of one route (the route default) keeps the form above.
//
// DecodeStored also reads the JSON form, which stores written before this
// layout hold: such a store stays readable, and its values are replaced by
// the binary form as their keys are written again.
const (
	storedVersion       = 1
	storedVersionRoutes = 2
)

var statusCodes = [...]Status{1: StatusDone, 2: StatusRetrying, 3: StatusDead, 4: StatusParked}

func statusCode(s Status) byte {
	for i, v := range statusCodes {
		if i > 0 && v == s {
			return byte(i)
		}
	}
	return 0
}

// EncodeStored renders st in the stored form. It refuses what Encode
// refuses. Cost: one allocation of about 30 bytes plus the replay ids.
func EncodeStored(st State) ([]byte, error) {
	if err := st.check(); err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	n := 2 + 2*binary.MaxVarintLen64 + len(st.Provider) + 3*binary.MaxVarintLen64 + binary.MaxVarintLen64
	for _, id := range st.ReplayIDs {
		n += binary.MaxVarintLen64 + len(id)
	}
	for _, r := range st.Routes {
		n += 1 + 3*binary.MaxVarintLen64 + len(r.Name) + binary.MaxVarintLen64
		for _, id := range r.ReplayIDs {
			n += binary.MaxVarintLen64 + len(id)
		}
	}
	version := byte(storedVersion)
	if st.Routes != nil {
		version = storedVersionRoutes
		n += binary.MaxVarintLen64
	}
	b := make([]byte, 0, n)
	b = append(b, version, statusCode(st.Status))
	b = binary.AppendUvarint(b, uint64(st.NextAttempt))
	b = binary.AppendUvarint(b, uint64(len(st.Provider)))
	b = append(b, st.Provider...)
	for _, t := range []time.Time{st.FirstSeenAt, st.UpdatedAt, st.ExpiresAt} {
		b = binary.AppendVarint(b, t.UnixMilli())
	}
	b = appendStrings(b, st.ReplayIDs)
	if st.Routes != nil {
		b = binary.AppendUvarint(b, uint64(len(st.Routes)))
		for _, r := range st.Routes {
			b = binary.AppendUvarint(b, uint64(len(r.Name)))
			b = append(b, r.Name...)
			b = append(b, statusCode(r.Status))
			b = binary.AppendUvarint(b, uint64(r.NextAttempt))
			b = binary.AppendVarint(b, r.ExpiresAt.UnixMilli())
			b = appendStrings(b, r.ReplayIDs)
		}
	}
	return b, nil
}

// appendStrings appends a uvarint count, then each string as a uvarint
// length and its bytes.
func appendStrings(b []byte, ss []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

var errShort = errors.New("stored state is cut short")

// DecodeStored reads a value of the state store: the stored form, or the
// changelog's JSON (stores written by older versions). It checks what
// Decode checks. Cost of the stored form: no JSON, two or three small
// allocations (the provider, the replay ids).
func DecodeStored(b []byte) (State, error) {
	if len(b) > 0 && b[0] == '{' {
		return Decode(b)
	}
	if len(b) < 2 || b[0] != storedVersion && b[0] != storedVersionRoutes {
		return State{}, fmt.Errorf("decode stored state: not a stored state (first byte %q)", firstByte(b))
	}
	var st State
	r := storedReader{b: b[2:]}
	st.Status = r.status(b[1])
	st.NextAttempt = int(r.uvarint())
	st.Provider = r.str()
	for _, t := range []*time.Time{&st.FirstSeenAt, &st.UpdatedAt, &st.ExpiresAt} {
		*t = time.UnixMilli(r.varint()).UTC()
	}
	st.ReplayIDs = r.replayIDs()
	if b[0] == storedVersionRoutes {
		n := r.uvarint()
		if n > uint64(len(r.b)) { // every route takes bytes: a count past them is garbage
			r.err = cmp.Or(r.err, errShort)
			n = 0
		}
		st.Routes = make([]RouteState, n)
		for i := range st.Routes {
			rs := &st.Routes[i]
			rs.Name = r.str()
			if len(r.b) == 0 {
				r.err = cmp.Or(r.err, errShort)
				break
			}
			code := r.b[0]
			r.b = r.b[1:]
			rs.Status = r.status(code)
			rs.NextAttempt = int(r.uvarint())
			rs.ExpiresAt = time.UnixMilli(r.varint()).UTC()
			rs.ReplayIDs = r.replayIDs()
		}
	}
	switch {
	case r.err != nil:
		return State{}, fmt.Errorf("decode stored state: %w", r.err)
	case len(r.b) > 0:
		return State{}, fmt.Errorf("decode stored state: %d bytes left over", len(r.b))
	}
	if err := st.check(); err != nil {
		return State{}, fmt.Errorf("decode stored state: %w", err)
	}
	return st, nil
}

func firstByte(b []byte) string {
	if len(b) == 0 {
		return "none"
	}
	return fmt.Sprintf("%#x", b[0])
}

// storedReader reads the fields of the stored form; the first error sticks.
type storedReader struct {
	b   []byte
	err error
}

// status reads a status code; an unknown one is an error.
func (r *storedReader) status(code byte) Status {
	if int(code) >= len(statusCodes) || code == 0 {
		r.err = cmp.Or(r.err, fmt.Errorf("unknown status code %d", code))
		return ""
	}
	return statusCodes[code]
}

// replayIDs reads a list of replay ids, at most MaxReplayIDs; none is nil.
func (r *storedReader) replayIDs() []string {
	n := r.uvarint()
	switch {
	case n == 0 || r.err != nil:
		return nil
	case n > MaxReplayIDs:
		r.err = fmt.Errorf("%d replay ids, at most %d", n, MaxReplayIDs)
		return nil
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = r.str()
	}
	return ids
}

func (r *storedReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.skip(n)
	return v
}

func (r *storedReader) varint() int64 {
	v, n := binary.Varint(r.b)
	r.skip(n)
	return v
}

// skip moves past a varint of n bytes (n <= 0: none could be read).
func (r *storedReader) skip(n int) {
	if n <= 0 {
		r.err = cmp.Or(r.err, errShort)
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

func (r *storedReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// StoredFromChangelog turns a changelog value into its stored form and
// returns its expiry: what restore writes to Badger for each record. It
// accepts exactly what Decode accepts. Values laid out as Encode writes them
// (fields in its order, strings without escapes, times in
// headers.TimeLayout) are read without a JSON parse; anything else goes
// through Decode.
func StoredFromChangelog(v []byte) (stored []byte, expiresAt time.Time, err error) {
	if bytes.HasPrefix(v, []byte(`{"v":"holds"`)) { // an entity's holds: stored as written, never expire
		if _, err := DecodeHolds(v); err != nil {
			return nil, time.Time{}, err
		}
		return v, time.Time{}, nil
	}
	st, ok := scanEncoded(v)
	if !ok {
		if st, err = Decode(v); err != nil {
			return nil, time.Time{}, err
		}
	} else if err := st.check(); err != nil {
		return nil, time.Time{}, fmt.Errorf("decode state: %w", err)
	}
	stored, err = EncodeStored(st)
	return stored, st.ExpiresAt, err
}

// scanEncoded reads a value in Encode's exact layout. ok is false for
// anything else (including valid JSON in another layout), which the caller
// then decodes with encoding/json.
func scanEncoded(v []byte) (st State, ok bool) {
	s := encodedScanner{b: v, ok: true}
	s.lit(`{"v":1,"status":"`)
	st.Status = Status(s.str())
	if s.opt(`,"next_attempt":`) {
		st.NextAttempt = s.num()
	}
	s.lit(`,"provider":"`)
	st.Provider = s.str()
	s.lit(`,"first_seen_at":"`)
	st.FirstSeenAt = s.time()
	s.lit(`,"updated_at":"`)
	st.UpdatedAt = s.time()
	s.lit(`,"expires_at":"`)
	st.ExpiresAt = s.time()
	if s.opt(`,"replay_ids":[`) {
		for first := true; s.ok; first = false {
			if s.opt(`]`) {
				break
			}
			if !first {
				s.lit(`,`)
			}
			s.lit(`"`)
			st.ReplayIDs = append(st.ReplayIDs, s.str())
		}
		if len(st.ReplayIDs) == 0 {
			s.ok = false // Encode leaves an empty list out
		}
	}
	s.lit(`}`)
	return st, s.ok && len(s.b) == 0
}

// encodedScanner walks Encode's layout; any surprise clears ok.
type encodedScanner struct {
	b  []byte
	ok bool
}

func (s *encodedScanner) lit(want string) {
	if !s.opt(want) {
		s.ok = false
	}
}

// opt consumes want if the input starts with it.
func (s *encodedScanner) opt(want string) bool {
	if len(s.b) < len(want) || string(s.b[:len(want)]) != want {
		return false
	}
	s.b = s.b[len(want):]
	return true
}

// str reads a string's bytes up to its closing quote (the opening one is
// consumed): plain printable ASCII only, so no escape or UTF-8 question
// arises.
func (s *encodedScanner) str() string {
	for i, c := range s.b {
		switch {
		case c == '"':
			v := string(s.b[:i])
			s.b = s.b[i+1:]
			return v
		case c < 0x20 || c >= 0x7f || c == '\\':
			s.ok = false
			return ""
		}
	}
	s.ok = false
	return ""
}

func (s *encodedScanner) num() int {
	n, i := 0, 0
	for ; i < len(s.b) && i < 9 && s.b[i] >= '0' && s.b[i] <= '9'; i++ {
		n = n*10 + int(s.b[i]-'0')
	}
	if i == 0 || i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' || s.b[0] == '0' && i > 1 {
		s.ok = false
		return 0
	}
	s.b = s.b[i:]
	return n
}

// time reads 2006-01-02T15:04:05.000Z and its closing quote.
func (s *encodedScanner) time() time.Time {
	const n = len("2006-01-02T15:04:05.000Z")
	if len(s.b) <= n || s.b[n] != '"' {
		s.ok = false
		return time.Time{}
	}
	t, ok := parseTimeLayout(s.b[:n])
	if !ok {
		s.ok = false
		return time.Time{}
	}
	s.b = s.b[n+1:]
	return t
}

// parseTimeLayout parses exactly 2006-01-02T15:04:05.000Z, checking every
// field's range (a day past the month's end is refused, as time.Parse does).
func parseTimeLayout(b []byte) (time.Time, bool) {
	digits := func(i, n int) (int, bool) {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' || b[19] != '.' || b[23] != 'Z' {
		return time.Time{}, false
	}
	var f [7]int
	for i, pos := range [7][2]int{{0, 4}, {5, 2}, {8, 2}, {11, 2}, {14, 2}, {17, 2}, {20, 3}} {
		v, ok := digits(pos[0], pos[1])
		if !ok {
			return time.Time{}, false
		}
		f[i] = v
	}
	if f[1] < 1 || f[1] > 12 || f[2] < 1 || f[3] > 23 || f[4] > 59 || f[5] > 59 {
		return time.Time{}, false
	}
	t := time.Date(f[0], time.Month(f[1]), f[2], f[3], f[4], f[5], f[6]*1e6, time.UTC)
	if t.Day() != f[2] {
		return time.Time{}, false // 2026-02-30 and the like
	}
	return t, true
}
