package schema

import (
	"testing"

	"github.com/hookline/hookline/pkg/providers/glob"
	"github.com/hookline/hookline/pkg/testkit/corpus"
)

// BenchmarkCheckGitHub is the cost of Check on GitHub's example payloads
// against GitHub's schema mapped per event type (one op: one payload, in
// turn). Profile it with -cpuprofile and -memprofile.
func BenchmarkCheckGitHub(b *testing.B) {
	exs := corpus.GitHub(b)
	defs, err := corpus.GitHubMapping()
	if err != nil {
		b.Fatal(err)
	}
	var s Set
	for ev, ref := range defs {
		if err := s.Add(glob.MustCompile(ev), "", ref); err != nil {
			b.Fatal(err)
		}
	}
	var bytes int64
	for _, e := range exs {
		bytes += int64(len(e.Body))
	}
	b.SetBytes(bytes / int64(len(exs)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := exs[i%len(exs)]
		_ = s.Check(e.Event, e.Body)
		i++
	}
}
