package deliver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"net/http"
	"strconv"
	"sync"
)

// signer makes the Standard Webhooks symmetric signature of a destination's
// calls (issue 22; the spec's "Signature scheme"): for each key, in order,
// "v1," and the standard base64 of HMAC-SHA256(key, id + "." + timestamp +
// "." + body), space-separated. It is safe for concurrent use. Its HMAC
// states and scratch buffer are pooled, so a call costs one HMAC pass over
// the content per key and, once warm, two allocations: one string holding
// both the timestamp and the signatures, and the slice of the three header
// values.
type signer struct {
	keys [][]byte
	pool sync.Pool // *signState
}

// signState is one goroutine's HMACs (one per key, in the keys' order) and
// scratch buffer.
type signState struct {
	macs []hash.Hash
	buf  []byte
	sum  []byte
}

func newSigner(keys [][]byte) *signer {
	s := &signer{keys: keys}
	s.pool.New = func() any {
		st := &signState{macs: make([]hash.Hash, len(s.keys)), sum: make([]byte, 0, sha256.Size)}
		for i, k := range s.keys {
			st.macs[i] = hmac.New(sha256.New, k)
		}
		return st
	}
	return s
}

// set signs body as id at unix second ts and sets webhook-id,
// webhook-timestamp and webhook-signature in hdr, replacing any of the same
// name (a forwarded provider's).
func (s *signer) set(hdr http.Header, id string, ts int64, body []byte) {
	st := s.pool.Get().(*signState)
	defer s.pool.Put(st)

	// buf: "id.ts." (the signed prefix), then the header value appended.
	b := append(st.buf[:0], id...)
	b = append(b, '.')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '.')
	n := len(b)
	for i, mac := range st.macs {
		mac.Reset()
		mac.Write(b[:n])
		mac.Write(body)
		st.sum = mac.Sum(st.sum[:0])
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, "v1,"...)
		b = base64.StdEncoding.AppendEncode(b, st.sum)
	}
	st.buf = b

	// One string for "ts.signatures", cut in two; one slice for the three
	// values, each capped so that an Add on one cannot overwrite the next.
	v := string(b[len(id)+1:])
	tsLen := n - len(id) - 2
	vals := []string{id, v[:tsLen], v[tsLen+1:]}
	hdr[HeaderWebhookID] = vals[0:1:1]
	hdr[HeaderWebhookTimestamp] = vals[1:2:2]
	hdr[HeaderWebhookSignature] = vals[2:3:3]
}
