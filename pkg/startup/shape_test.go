package startup

import (
	"fmt"
	"testing"
	"time"

	"github.com/hookline/hookline/pkg/providers"
)

// TestShapeChangelogCoversLongestTTL: the changelog is created with a
// retention of the longest dedup TTL any provider gives, an event type's
// override included (seed 000: per event type), never under 7 days.
func TestShapeChangelogCoversLongestTTL(t *testing.T) {
	svc := service(t, map[string]string{"KAFKA_BROKERS": "127.0.0.1:1", "HOOKLINE_TOPIC_PREFIX": "x."})
	for _, tc := range []struct {
		dedup string
		want  time.Duration
	}{
		{`{call_ended: 168h, call_analyzed: 72h}`, 7 * 24 * time.Hour},
		{`{"*": 24h, call_ended: 1000h}`, 1000 * time.Hour}, // an event type's override is the longest
		{`{"*": 24h}`, 7 * 24 * time.Hour},                  // the changelog keeps 7 days at least
	} {
		reg, err := providers.Parse([]byte(fmt.Sprintf("providers: {retell: {preset: retell, secret_env: [S], dedup_ttl: %s}}", tc.dedup)),
			func(string) (string, bool) { return "s3cret", true })
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range svc.Names.Specs(svc.Shape(reg)) {
			if s.Name == svc.Names.Changelog {
				if got, want := s.Configs["retention.ms"], fmt.Sprint(tc.want.Milliseconds()); got != want {
					t.Errorf("dedup_ttl %s: changelog retention.ms %s, want %s", tc.dedup, got, want)
				}
			}
		}
	}
}
