package store

import (
	"cmp"
	"time"

	"github.com/hookline/hookline/pkg/headers"
)

// Count is a number of entries, and how many of them are unresolved.
type Count struct {
	Total      int `json:"total"`
	Unresolved int `json:"unresolved"`
}

// Oldest names the oldest entry of a set.
type Oldest struct {
	Ref        string `json:"ref"`
	DeadAt     string `json:"dead_at"`
	AgeSeconds int64  `json:"age_seconds"`
	Key        string `json:"key"`
	Provider   string `json:"provider"`
	Route      string `json:"route"`
}

// Stats summarises the DLQ, as `dlq stats` prints it and GET /dlq/stats
// returns it.
type Stats struct {
	Total        int              `json:"total"`
	Unresolved   int              `json:"unresolved"`
	Resolved     int              `json:"resolved"`
	ByResolution map[string]int   `json:"by_resolution"`
	ByProvider   map[string]Count `json:"by_provider"`
	// ByRoute counts by provider/route ("stripe/billing"; "stripe/default"
	// for entries without a route header).
	ByRoute  map[string]Count `json:"by_route"`
	ByReason map[string]Count `json:"by_reason"`
	// Oldest is the oldest entry still in the topic; OldestUnresolved the
	// oldest one nobody resolved. Nil when there is none.
	Oldest           *Oldest `json:"oldest"`
	OldestUnresolved *Oldest `json:"oldest_unresolved"`
}

// Summarise counts entries at now. An empty provider or reason header is
// counted under "(none)".
func Summarise(es []*Entry, now time.Time) Stats {
	st := Stats{ByResolution: map[string]int{}, ByProvider: map[string]Count{}, ByRoute: map[string]Count{}, ByReason: map[string]Count{}}
	var oldest, oldestUnres *Entry
	older := func(a, b *Entry) bool {
		return b == nil || a.DeadAt().Before(b.DeadAt()) || a.DeadAt().Equal(b.DeadAt()) && a.Ref.Less(b.Ref)
	}
	for _, e := range es {
		st.Total++
		un := 0
		if e.Resolved() {
			st.Resolved++
			st.ByResolution[e.Resolution.Resolution]++
		} else {
			st.Unresolved++
			un = 1
			if older(e, oldestUnres) {
				oldestUnres = e
			}
		}
		if older(e, oldest) {
			oldest = e
		}
		add := func(m map[string]Count, k string) {
			if k == "" {
				k = "(none)"
			}
			c := m[k]
			c.Total++
			c.Unresolved += un
			m[k] = c
		}
		add(st.ByProvider, e.Header(headers.Provider))
		add(st.ByRoute, cmp.Or(e.Header(headers.Provider), "(none)")+"/"+e.Route())
		add(st.ByReason, e.Header(headers.DeadReason))
	}
	st.Oldest = oldestOf(oldest, now)
	st.OldestUnresolved = oldestOf(oldestUnres, now)
	return st
}

func oldestOf(e *Entry, now time.Time) *Oldest {
	if e == nil {
		return nil
	}
	return &Oldest{
		Ref:        e.Ref.String(),
		DeadAt:     headers.FormatTime(e.DeadAt()),
		AgeSeconds: int64(now.Sub(e.DeadAt()).Seconds()),
		Key:        e.Key(),
		Provider:   e.Header(headers.Provider),
		Route:      e.Route(),
	}
}
