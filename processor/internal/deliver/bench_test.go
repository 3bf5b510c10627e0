package deliver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkHTTPHandle measures one delivery of a 1 KiB body to a local
// server answering 204, through HTTP.Handle (header filtering, breaker,
// per-call timeout, classification) and, for comparison, through a bare
// http.Client.Do of the same request on the same client and connection pool.
// The difference is Handle's overhead; both include the loopback round trip.
// HandleSigned is Handle with one signing secret (Standard Webhooks): its
// difference from Handle is the cost of signing a call, of which Sign is the
// signature alone (the rest: three more headers written and parsed).
//
//	go test -run '^$' -bench BenchmarkHTTPHandle ./processor/internal/deliver
func BenchmarkHTTPHandle(b *testing.B) {
	srv := mustServer(b, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})
	h := mustHTTP(b, HTTPOptions{URL: srv.URL + "/hooks/stripe"})
	signed := mustHTTP(b, HTTPOptions{URL: srv.URL + "/hooks/stripe", SigningSecrets: [][]byte{[]byte("0123456789abcdef0123456789abcdef")}})
	d := testDelivery()
	d.Body = []byte(`{"id":"evt_1","data":"` + strings.Repeat("x", 1000) + `"}`)

	for _, bc := range []struct {
		name string
		h    *HTTP
	}{{"Handle", h}, {"HandleSigned", signed}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(d.Body)))
			for b.Loop() {
				if err := bc.h.Handle(b.Context(), d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("Sign", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(d.Body)))
		hdr := http.Header{}
		for b.Loop() {
			signed.signer.set(hdr, d.Key, 1614265330, d.Body)
		}
	})
	b.Run("ClientDo", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(d.Body)))
		for b.Loop() {
			req, err := http.NewRequestWithContext(b.Context(), http.MethodPost, srv.URL+"/hooks/stripe", bytes.NewReader(d.Body))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Stripe-Signature", string(d.Headers[0].Value))
			req.Header.Set("Content-Type", d.ContentType)
			req.Header.Set("Idempotency-Key", d.Key)
			req.Header.Set("X-Hookline-Attempt", strconv.Itoa(d.Attempt))
			req.Header.Set("X-Hookline-Provider", d.Provider)
			req.Header.Set("X-Hookline-Event-Type", d.EventType)
			req.Header.Set("User-Agent", "hookline/1")
			resp, err := h.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Fatal(resp.Status)
			}
		}
	})
}
