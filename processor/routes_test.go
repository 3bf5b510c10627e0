package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers"
	"github.com/hookline/hookline/pkg/topics"
)

// TestOwnTopicsRefused: a route's topic destination in hookline's own
// namespace (under HOOKLINE_TOPIC_PREFIX) stops the processor at start with
// the provider, the route and the field; a consumers' topic is fine.
func TestOwnTopicsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "providers.yaml")
	yml := `providers:
  shop:
    preset: stripe
    secret_env: [S]
    routes:
      bad: {destination: {topic: dev.webhooks.raw}}
      good: {destination: {topic: shop.ledger}}
      other: {destination: {topic: webhooks.raw}}
`
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := providers.LoadWithoutSecrets(path)
	if err != nil {
		t.Fatal(err)
	}
	err = ownTopics(reg, topics.NewNames("dev.", nil))
	if err == nil || !strings.Contains(err.Error(), `provider "shop": route "bad": destination.topic: dev.webhooks.raw`) {
		t.Errorf("ownTopics = %v, want route bad refused", err)
	}
	for _, fine := range []string{`"good"`, `"other"`} {
		if err != nil && strings.Contains(err.Error(), fine) {
			t.Errorf("route %s refused: %v", fine, err)
		}
	}
}
