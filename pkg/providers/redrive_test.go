package providers

import (
	"strings"
	"testing"
	"time"
)

func TestRedrive(t *testing.T) {
	const head = "providers:\n  acme:\n    preset: github\n    secret_env: [S]\n"
	e := env{"S": "secret"}
	r := mustParse(t, head+"    redrive: {after: 1h, max: 2}\n", e)
	if got := mustGet(t, r, "acme").Redrive; got == nil || got.After != time.Hour || got.Max != 2 {
		t.Fatalf("redrive = %+v, want after 1h, max 2", got)
	}
	if got := mustGet(t, mustParse(t, head, e), "acme").Redrive; got != nil {
		t.Fatalf("no redrive block: got %+v, want nil", got)
	}
	for _, tc := range []struct{ block, want string }{
		{"{max: 2}", "redrive.after: required"},
		{"{after: soon, max: 2}", "redrive.after: \"soon\" is not a duration"},
		{"{after: 1h}", "redrive.max: want 1 to 10"},
		{"{after: 1h, max: 11}", "redrive.max: want 1 to 10"},
		{"{after: 1h, max: 2, every: 5m}", "every"},
	} {
		_, err := Parse([]byte(head+"    redrive: "+tc.block+"\n"), e.lookup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("redrive %s: err = %v, want it to say %q", tc.block, err, tc.want)
		}
	}
}
