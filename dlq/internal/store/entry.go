package store

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/pkg/headers"
)

// Entry is one record of webhooks.dlq with its resolution, if any.
type Entry struct {
	Ref Ref
	// Record is the DLQ record as read. Its Value is nil unless the read
	// asked for bodies (BodyBytes is always set).
	Record     *kgo.Record
	BodyBytes  int
	Resolution *Resolution
}

// DeadAt is when the record was dead-lettered: the DLQ record's timestamp.
func (e *Entry) DeadAt() time.Time { return e.Record.Timestamp.UTC() }

// Header returns the value of a header, "" when absent.
func (e *Entry) Header(name string) string { return headers.Value(e.Record, name) }

// Key is the record key, the idempotency key.
func (e *Entry) Key() string { return string(e.Record.Key) }

// Route is the route the entry was dead-lettered for: its hookline.route
// header, headers.DefaultRoute when it has none (every entry written
// before routes).
func (e *Entry) Route() string { return control.RecordRoute(e.Record) }

// Resolved reports whether an operator (or a replay) resolved the entry.
func (e *Entry) Resolved() bool { return e.Resolution != nil }

// Summary is an entry as `dlq list --json` prints it and GET /dlq returns it.
type Summary struct {
	Ref       string `json:"ref"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	DeadAt    string `json:"dead_at"`
	Key       string `json:"key"`
	Provider  string `json:"provider"`
	// Route is the route the delivery failed for (Entry.Route).
	Route       string `json:"route"`
	EventType   string `json:"event_type"`
	Reason      string `json:"reason"`
	Origin      string `json:"origin"`
	Attempt     int    `json:"attempt"`
	FirstSeenAt string `json:"first_seen_at,omitempty"`
	// ReplayID is set when this DLQ record is itself a replay that failed.
	ReplayID   string      `json:"replay_id,omitempty"`
	ErrorCount int         `json:"error_count"`
	LastError  string      `json:"last_error"`
	BodyBytes  int         `json:"body_bytes"`
	Resolution *Resolution `json:"resolution"`
}

// Summary renders the entry for listing.
func (e *Entry) Summary() Summary {
	es, _ := headers.GetErrors(e.Record)
	s := Summary{
		Ref:         e.Ref.String(),
		Partition:   e.Ref.Partition,
		Offset:      e.Ref.Offset,
		DeadAt:      headers.FormatTime(e.DeadAt()),
		Key:         e.Key(),
		Provider:    e.Header(headers.Provider),
		Route:       e.Route(),
		EventType:   e.Header(headers.EventType),
		Reason:      e.Header(headers.DeadReason),
		Origin:      e.Header(headers.Origin),
		FirstSeenAt: e.Header(headers.FirstSeenAt),
		ReplayID:    e.Header(headers.ReplayID),
		ErrorCount:  len(es),
		BodyBytes:   e.BodyBytes,
		Resolution:  e.Resolution,
	}
	s.Attempt, _ = strconv.Atoi(e.Header(headers.Attempt))
	if len(es) > 0 {
		s.LastError = es[len(es)-1].Error
	}
	return s
}

// Header is one record header, in record order.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Detail is an entry as `dlq show --json` prints it and GET /dlq/{ref}
// returns it: the summary, every header, the error history and the body.
type Detail struct {
	Summary
	Headers []Header             `json:"headers"`
	Errors  []headers.ErrorEntry `json:"errors"`
	// ErrorsInvalid says why hookline.errors could not be decoded, if so.
	ErrorsInvalid string `json:"errors_invalid,omitempty"`
	// Body is the body as text when it is valid UTF-8, BodyBase64 otherwise.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// BodyJSON says the body is JSON; BodyPretty is then it indented.
	BodyJSON   bool   `json:"body_json"`
	BodyPretty string `json:"body_pretty,omitempty"`
}

// Detail renders the entry with everything; the entry must have been read
// with its body.
func (e *Entry) Detail() Detail {
	d := Detail{Summary: e.Summary(), Headers: make([]Header, 0, len(e.Record.Headers)), Errors: []headers.ErrorEntry{}}
	for _, h := range e.Record.Headers {
		d.Headers = append(d.Headers, Header{Name: h.Key, Value: string(h.Value)})
	}
	if es, err := headers.GetErrors(e.Record); err != nil {
		d.ErrorsInvalid = err.Error()
	} else if es != nil {
		d.Errors = es
	}
	body := e.Record.Value
	if utf8.Valid(body) {
		d.Body = string(body)
	} else {
		d.BodyBase64 = base64.StdEncoding.EncodeToString(body)
	}
	if json.Valid(body) {
		d.BodyJSON = true
		if prettyFits(body) {
			var b bytes.Buffer
			if json.Indent(&b, body, "", "  ") == nil {
				d.BodyPretty = b.String()
			}
		}
	}
	return d
}

// Bounds of the pretty-printed body (Detail.BodyPretty): past either, the
// body is shown only as it is. Indenting costs two spaces a level on every
// line, so a 20 KB body nested 9,990 deep came back as 199.7 MB and took
// dlq serve to 924 MB (issue 25).
const (
	MaxPrettyDepth = 64
	MaxPrettyBytes = 4 << 20
)

// prettyFits reports whether body, valid JSON, nests at most
// MaxPrettyDepth deep and indents to at most MaxPrettyBytes: one pass that
// counts what json.Indent would add (a newline and two spaces a level
// after each '{', '[' and ',' and before each closing bracket).
func prettyFits(body []byte) bool {
	size, depth := len(body), 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > MaxPrettyDepth {
				return false
			}
			size += 1 + 2*depth
		case c == '}' || c == ']':
			depth--
			size += 1 + 2*depth
		case c == ',':
			size += 1 + 2*depth
		}
		if size > MaxPrettyBytes {
			return false
		}
	}
	return true
}
