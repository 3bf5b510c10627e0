package outcome

import (
	"encoding/json"
	"strconv"
)

// AppendJSON appends o to b as encoding/json would marshal it (same field
// order, same omitempty fields, same escaping), without reflection: every
// record the processor ends, a duplicate included, writes one outcome, and
// json.Marshal was about a fifth of a duplicate's CPU. A string that needs
// any escaping (quotes, backslashes, control bytes, <, >, &, non-ASCII)
// is handed to encoding/json, so the output is byte for byte Marshal's
// (TestOutcomeJSONMatchesMarshal).
func (o *Outcome) AppendJSON(b []byte) []byte {
	b = appendField(b, `{"key":`, o.Key)
	b = appendField(b, `,"provider":`, o.Provider)
	b = appendField(b, `,"event_type":`, o.EventType)
	b = appendField(b, `,"status":`, o.Status)
	b = strconv.AppendInt(append(b, `,"attempt":`...), int64(o.Attempt), 10)
	b = appendField(b, `,"origin":`, o.Origin)
	b = strconv.AppendInt(append(b, `,"duration_ms":`...), o.DurationMS, 10)
	b = appendOptional(b, `,"error":`, o.Error)
	b = appendField(b, `,"time":`, o.Time)
	b = appendOptional(b, `,"tier":`, o.Tier)
	b = appendOptional(b, `,"dead_reason":`, o.DeadReason)
	b = appendOptional(b, `,"replay_id":`, o.ReplayID)
	b = appendOptional(b, `,"lane":`, o.Lane)
	b = appendOptional(b, `,"route":`, o.Route)
	b = appendOptional(b, `,"replay_of":`, o.ReplayOf)
	b = appendOptional(b, `,"transform":`, o.Transform)
	b = appendOptional(b, `,"transform_sha256":`, o.TransformSHA256)
	if o.TransformSkipped {
		b = append(b, `,"transform_skipped":true`...)
	}
	b = strconv.AppendInt(append(b, `,"partition":`...), int64(o.Partition), 10)
	b = strconv.AppendInt(append(b, `,"offset":`...), o.Offset, 10)
	b = appendOptional(b, `,"trace_id":`, o.TraceID)
	return append(b, '}')
}

func appendOptional(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	return appendField(b, name, v)
}

func appendField(b []byte, name, v string) []byte {
	return AppendJSONString(append(b, name...), v)
}

// AppendJSONString appends v to b as a JSON string, byte for byte what
// encoding/json marshals (HTML characters escaped too): the plain ASCII
// strings hookline writes are copied, any other is handed to encoding/json.
// The processor's changelog values use it too (decide.Encode).
func AppendJSONString(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(v) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, v...)
	return append(b, '"')
}
