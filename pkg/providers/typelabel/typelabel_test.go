package typelabel

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hookline/hookline/pkg/envconf"
	"github.com/hookline/hookline/pkg/providers/glob"
)

func globs(patterns ...string) []glob.Glob {
	out := make([]glob.Glob, 0, len(patterns))
	for _, p := range patterns {
		out = append(out, glob.MustCompile(p))
	}
	return out
}

// TestBound: with maxSeen N, the first N distinct unnamed types of a
// provider keep their own label and the N+1th is other (or the first glob
// of the file it matches); the file's names are always their own, before
// and after the bound is reached; each provider has its own N.
func TestBound(t *testing.T) {
	const n = 3
	l := New(map[string][]glob.Glob{
		"shop":  globs("order.paid", "refund.*", "*", "*.deleted"),
		"other": nil,
	}, n)
	steps := []struct{ provider, typ, want string }{
		{"shop", "order.paid", "order.paid"}, // named: takes no slot
		{"shop", "a", "a"},
		{"shop", "b", "b"},
		{"shop", "a", "a"},                           // seen: no new slot
		{"shop", "refund.created", "refund.created"}, // matches a glob, still a slot while there is one
		{"shop", "c", Other},                         // the N+1th distinct type
		{"shop", "refund.failed", "refund.*"},        // beyond N: its glob
		{"shop", "user.deleted", "*.deleted"},        // "*" is skipped: it says nothing
		{"shop", "order.paid", "order.paid"},         // named, after the bound
		{"shop", "b", "b"},                           // seen before the bound, still its own
		{"other", "a", "a"},                          // each provider has its own N
		{"other", "b", "b"},
		{"other", "c", "c"},
		{"other", "d", Other},
		{"ghost", "a", Other}, // a provider New was not given
	}
	for i, s := range steps {
		if got := l.Label(s.provider, s.typ); got != s.want {
			t.Errorf("step %d: Label(%s, %q) = %q, want %q", i, s.provider, s.typ, got, s.want)
		}
	}
}

// TestNotLabelable: an empty type, an over-long one and one that is not
// printable UTF-8 never get a label of their own and take no slot.
func TestNotLabelable(t *testing.T) {
	l := New(map[string][]glob.Glob{"p": globs("x*")}, 1)
	for _, typ := range []string{"", strings.Repeat("y", MaxLen+1), "bad\xffutf8", "tab\there", "nul\x00"} {
		if got := l.Label("p", typ); got != Other {
			t.Errorf("Label(%q) = %q, want other", typ, got)
		}
	}
	if got := l.Label("p", "x"+strings.Repeat("y", MaxLen)); got != "x*" {
		t.Errorf("an over-long type matching a glob: %q, want x*", got)
	}
	long := strings.Repeat("y", MaxLen)
	if got := l.Label("p", long); got != long {
		t.Errorf("a type of MaxLen bytes: %q, want itself (no slot was taken before)", got)
	}
}

// TestZero: maxSeen 0 (and below) labels by the file alone.
func TestZero(t *testing.T) {
	for _, n := range []int{0, -1} {
		l := New(map[string][]glob.Glob{"p": globs("a", "b.*")}, n)
		for typ, want := range map[string]string{"a": "a", "b.x": "b.*", "c": Other} {
			if got := l.Label("p", typ); got != want {
				t.Errorf("maxSeen %d: Label(%q) = %q, want %q", n, typ, got, want)
			}
		}
	}
}

// TestConcurrent: many goroutines labelling many types at once keep the
// bound exactly (run with -race).
func TestConcurrent(t *testing.T) {
	const n = 10
	l := New(map[string][]glob.Glob{"p": nil}, n)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				v := l.Label("p", fmt.Sprintf("t%d", (i*7+g)%50))
				mu.Lock()
				seen[v] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != n+1 || !seen[Other] {
		t.Fatalf("%d label values (%v), want %d types and other", len(seen), seen, n)
	}
}

// TestLabelAllocs: a named or seen type costs no allocation.
func TestLabelAllocs(t *testing.T) {
	l := New(map[string][]glob.Glob{"p": globs("a", "b.*")}, 2)
	l.Label("p", "seen")
	if n := testing.AllocsPerRun(100, func() {
		_ = l.Label("p", "a")
		_ = l.Label("p", "seen")
		_ = l.Label("p", "b.x")
		_ = l.Label("q", "x")
	}); n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}

// TestLabelIsOwnCopy: a label never shares the caller's buffer.
func TestLabelIsOwnCopy(t *testing.T) {
	l := New(map[string][]glob.Glob{"p": nil}, 1)
	buf := []byte("typ")
	got := l.Label("p", string(buf))
	buf[0] = 'x'
	if got != "typ" || l.Label("p", "typ") != "typ" {
		t.Fatalf("label %q, want typ", got)
	}
}

func TestReadEnv(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  int
		bad   bool
	}{
		{"", DefaultSeen, false},
		{"0", 0, false},
		{"250", 250, false},
		{"-1", 0, true},
		{fmt.Sprint(MaxSeen + 1), 0, true},
		{"many", 0, true},
	} {
		r := envconf.New(func(name string) (string, bool) {
			if name == "HOOKLINE_EVENT_TYPE_LABELS" && tc.value != "" {
				return tc.value, true
			}
			return "", false
		})
		got := ReadEnv(r)
		if err := r.Err(); (err != nil) != tc.bad {
			t.Errorf("%q: error %v, want error %v", tc.value, err, tc.bad)
		} else if !tc.bad && got != tc.want {
			t.Errorf("%q: %d, want %d", tc.value, got, tc.want)
		}
	}
}
