package api

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
)

// jsonContentType is the 202 answer's Content-Type, shared as gin's own
// JSON render shares it (a header value slice per answer otherwise).
var jsonContentType = []string{"application/json; charset=utf-8"}

// answerBufs holds the buffers 202 answers are written from.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// answerAccepted writes out as 202 with the body c.JSON wrote (the same
// bytes and Content-Type) without encoding/json's reflection: the answer is
// on every accepted request's path.
func answerAccepted(c *gin.Context, out accepted) {
	bp := answerBufs.Get().(*[]byte)
	b := out.appendJSON((*bp)[:0])
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Status(http.StatusAccepted)
	_, _ = c.Writer.Write(b) // a write error is the client gone: nothing to answer
	*bp = b
	answerBufs.Put(bp)
}

// appendJSON appends a's JSON encoding as json.Marshal gives it: its
// fields in order, the omitempty ones left out when empty.
func (a accepted) appendJSON(b []byte) []byte {
	b = append(b, `{"status":`...)
	b = appendJSONString(b, a.Status)
	if a.IdempotencyKey != "" {
		b = append(b, `,"idempotency_key":`...)
		b = appendJSONString(b, a.IdempotencyKey)
	}
	if len(a.IdempotencyKeys) > 0 {
		b = append(b, `,"idempotency_keys":[`...)
		for i, k := range a.IdempotencyKeys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
		}
		b = append(b, ']')
	}
	if a.ReplayOf != "" {
		b = append(b, `,"replay_of":`...)
		b = appendJSONString(b, a.ReplayOf)
	}
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, a.RequestID)
	return append(b, '}')
}

// appendJSONString appends s quoted as json.Marshal quotes it: printable
// ASCII other than the characters it escapes is copied as it is; anything
// else (rare in keys and request ids) goes through json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
