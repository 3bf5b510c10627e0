package store

import (
	"strings"
	"testing"
	"time"
)

// One set of replay selection rules serves dlq replay and POST /dlq/replay.
func TestSelectionValidate(t *testing.T) {
	ref := []Ref{{Partition: 1, Offset: 2}}
	for _, c := range []struct {
		name string
		sel  Selection
		want string // "" when valid
	}{
		{"refs", Selection{Refs: ref}, ""},
		{"a key", Selection{Filter: Filter{Key: "stripe:evt_1"}}, ""},
		{"a provider, resolved too", Selection{Filter: Filter{Provider: "stripe"}, IncludeResolved: true}, ""},
		{"all, narrowed", Selection{All: true, Filter: Filter{Reason: "exhausted", Since: time.Now()}}, ""},
		{"a provider's route", Selection{Filter: Filter{Provider: "stripe", Route: "billing"}}, ""},
		{"a route of every provider", Selection{All: true, Filter: Filter{Route: "billing"}}, ""},
		{"only a route", Selection{Filter: Filter{Route: "billing"}}, "needs refs"},
		{"refs and a route", Selection{Refs: ref, Filter: Filter{Route: "billing"}}, "not both"},
		{"nothing", Selection{}, "needs refs"},
		{"only a reason", Selection{Filter: Filter{Reason: "exhausted"}}, "needs refs"},
		{"refs and a provider", Selection{Refs: ref, Filter: Filter{Provider: "stripe"}}, "not both"},
		{"refs and since", Selection{Refs: ref, Filter: Filter{Since: time.Now()}}, "not both"},
		{"refs and include-resolved", Selection{Refs: ref, IncludeResolved: true}, "not both"},
		{"all and a key", Selection{All: true, Filter: Filter{Key: "k"}}, "drop key and provider"},
	} {
		err := c.sel.Validate()
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate() = %v, want %q", c.name, err, c.want)
		}
	}
}
