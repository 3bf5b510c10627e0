package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/dlq/internal/settings"
	"github.com/hookline/hookline/dlq/internal/status"
	"github.com/hookline/hookline/pkg/control"
	"github.com/hookline/hookline/schemas"
)

// TestPrintStatusHeld: a route holding entities gets a HELD row (how
// many, the records waiting, the entity held longest, for how long and
// where its head waits, with the command to run), the verdict says why
// once it is held past HeldAfter, and the JSON carries the same, valid
// against the API's StatusReport; without reports there is no HELD
// section and every route's held is empty.
func TestPrintStatusHeld(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	known, err := settings.LoadKnown("../settings/testdata/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	hs := control.HeldReports{}
	hs.Apply(control.HeldReport{Partition: 3, Instance: "p1", At: now, Routes: []control.HeldRoute{{
		Provider: "stripe", Route: "crm", Entities: 2, Waiting: 5, Oldest: []control.HeldEntity{
			{Entity: "cus_1", Head: "stripe:evt_9", Since: now.Add(-90 * time.Minute), Waiting: 4, Dead: true, Tier: "1h"},
			{Entity: "cus_2", Head: "stripe:evt_12", Since: now.Add(-time.Minute), Waiting: 1, Tier: "1m"},
		}}}})
	doc, err := schemas.LoadAPI(schemas.DLQAPI)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		held control.HeldReports
		want []string // substrings of the text
		not  []string
	}{
		{name: "held", held: hs, want: []string{
			"DEGRADED",
			"stripe/crm: entity cus_1 held for 1h30m0s, behind stripe:evt_9, dead with on_dead: hold (dlq trace stripe:evt_9, then dlq replay); 2 entities held, 5 records waiting",
			"HELD",
			"stripe/crm  2         5        cus_1          1h30m     behind stripe:evt_9, dead with on_dead: hold",
		}},
		{name: "nothing held", not: []string{"HELD", "held"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := status.Build(status.Inputs{Now: now, Window: 5 * time.Minute, Known: known, Held: c.held,
				Raw: status.Backlog{Topic: "webhooks.raw", Group: "hookline-processor", Partitions: []status.Partition{}}})
			var b strings.Builder
			printStatus(&b, rep)
			out := b.String()
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range c.not {
				if strings.Contains(out, w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			var j strings.Builder
			if err := jsonLine(&j, rep); err != nil {
				t.Fatal(err)
			}
			if err := doc.ValidateComponent("StatusReport", []byte(j.String())); err != nil {
				t.Errorf("JSON not a StatusReport: %v\n%s", err, j.String())
			}
			wantJSON := `"held":{"entities":0,"waiting":0,"oldest":[]}`
			if c.held != nil {
				wantJSON = `"held":{"entities":2,"waiting":5,"oldest":[{"entity":"cus_1","head":"stripe:evt_9","since":"2026-03-01T10:30:00Z","waiting":4,"tier":"1h","dead":true,"age_seconds":5400},`
			}
			if !strings.Contains(j.String(), wantJSON) {
				t.Errorf("JSON lacks %s:\n%s", wantJSON, j.String())
			}
		})
	}
}
