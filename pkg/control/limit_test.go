package control

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLimitReports: a limit report round-trips through its record, keyed
// by route and instance; a bad key or report is refused.
func TestLimitReports(t *testing.T) {
	at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	l := Limit{Provider: "slowcrm", Route: "default", Instance: "p1", Limit: 117, At: at}
	r, err := LimitRecord("webhooks.control", l)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Key) != "limit:slowcrm/default:p1" {
		t.Fatalf("key %s, want limit:slowcrm/default:p1", r.Key)
	}
	got, ok, err := DecodeLimit(r)
	if err != nil || !ok || got.Provider != l.Provider || got.Route != l.Route || got.Instance != l.Instance || got.Limit != 117 || !got.At.Equal(at) {
		t.Fatalf("decoded %+v, %v, %v; want %+v", got, ok, err, l)
	}
	if _, ok, _ := DecodeLimit(&kgo.Record{Key: []byte("breaker:slowcrm:p1")}); ok {
		t.Fatal("a breaker report decoded as a limit report")
	}
	for _, key := range []string{"limit:slowcrm:p1", "limit:slowcrm/default", "limit:slowcrm/default:"} {
		if _, ok, err := DecodeLimit(&kgo.Record{Key: []byte(key)}); !ok || err == nil {
			t.Errorf("%s: ok %v, err %v; want an error naming the key's form", key, ok, err)
		}
	}
	if _, err := LimitRecord("webhooks.control", Limit{Provider: "slowcrm", Route: "default", Instance: "p1"}); err == nil {
		t.Error("a limit report of limit 0 was written")
	}
}
