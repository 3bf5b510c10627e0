package control

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// heldPrefix starts the key of a held-entities report: "held:<partition>",
// the partition of webhooks.raw it reports on. Follow skips these records.
const heldPrefix = "held:"

// HeldRefresh is how often a processor repeats a report that still names
// held entities; HeldStale the age after which a reader ignores one (its
// processor stopped, and no new owner of the partition has reported yet).
// HeldTop is how many entities a report names per route, the oldest held.
const (
	HeldRefresh = time.Minute
	HeldStale   = 3 * HeldRefresh
	HeldTop     = 5
)

// HeldReport is a processor's report of the entities held in one partition
// of webhooks.raw (issue 24: an ordered provider's entity whose head waits
// on a route, with records held behind it), a record of the control topic
// keyed "held:<partition>": per partition, not per processor, so the
// partition's next owner replaces its last owner's report, and the
// reports of several processors add up without counting a partition
// twice. The processor owning the partition writes one after each scan of
// its holds that found a change, and repeats one naming held entities
// every HeldRefresh; a partition with nothing held is a tombstone (a
// report without routes). `dlq status` reads them.
type HeldReport struct {
	Partition int32 `json:"partition"`
	// Instance is the processor that wrote it; At when.
	Instance string      `json:"instance"`
	At       time.Time   `json:"at"`
	Routes   []HeldRoute `json:"routes"`
}

// HeldRoute is what is held on one route of a provider: Entities held
// (with records waiting behind their head), Waiting records in all, and
// the HeldTop entities held longest, oldest first.
type HeldRoute struct {
	Provider string       `json:"provider"`
	Route    string       `json:"route"`
	Entities int          `json:"entities"`
	Waiting  int          `json:"waiting"`
	Oldest   []HeldEntity `json:"oldest"`
}

// HeldEntity is one held entity on a route: the key it waits behind (Head;
// empty once the head ended and the held records drain), since when,
// how many records wait, and where the head waits: Tier, a retry tier's
// name ("lane" when parked in the route's lane), or Dead (in the DLQ, and
// the route has on_dead: hold).
type HeldEntity struct {
	Entity  string    `json:"entity"`
	Head    string    `json:"head,omitempty"`
	Since   time.Time `json:"since"`
	Waiting int       `json:"waiting"`
	Tier    string    `json:"tier,omitempty"`
	Dead    bool      `json:"dead,omitempty"`
}

// heldBefore orders entities held longest first.
func heldBefore(a, b HeldEntity) int {
	return cmp.Or(a.Since.Compare(b.Since), cmp.Compare(a.Entity, b.Entity))
}

// KeepOldest adds e to the route's oldest, keeping the HeldTop held
// longest, in order. Cost: at most HeldTop moves.
func (r *HeldRoute) KeepOldest(e HeldEntity) {
	i, _ := slices.BinarySearchFunc(r.Oldest, e, heldBefore)
	if i >= HeldTop {
		return
	}
	r.Oldest = slices.Insert(r.Oldest, i, e)
	if len(r.Oldest) > HeldTop {
		r.Oldest = r.Oldest[:HeldTop]
	}
}

func (h HeldReport) key() string { return heldPrefix + strconv.Itoa(int(h.Partition)) }

// HeldRecord is the control topic record of h: a tombstone when it names
// no route.
func HeldRecord(topic string, h HeldReport) (*kgo.Record, error) {
	if h.Partition < 0 || h.Instance == "" {
		return nil, fmt.Errorf("held report of partition %d by %q: want a partition and an instance id", h.Partition, h.Instance)
	}
	r := &kgo.Record{Topic: topic, Key: []byte(h.key())}
	if len(h.Routes) == 0 {
		return r, nil
	}
	v, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	r.Value = v
	return r, nil
}

// DecodeHeld reads a held report; ok is false for a record of another
// kind. A tombstone is a report of the partition without routes.
func DecodeHeld(r *kgo.Record) (h HeldReport, ok bool, err error) {
	rest, ok := strings.CutPrefix(string(r.Key), heldPrefix)
	if !ok {
		return HeldReport{}, false, nil
	}
	p, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || p < 0 {
		return HeldReport{}, true, fmt.Errorf("control record %s: want held:<partition>", r.Key)
	}
	if r.Value == nil {
		return HeldReport{Partition: int32(p), At: r.Timestamp}, true, nil
	}
	if err := json.Unmarshal(r.Value, &h); err != nil {
		return HeldReport{}, true, fmt.Errorf("control record %s: %w", r.Key, err)
	}
	if h.Partition != int32(p) {
		return HeldReport{}, true, fmt.Errorf("control record %s names partition %d", r.Key, h.Partition)
	}
	return h, true, nil
}

// HeldReports is what a reader knows of the held entities: the latest
// report of each partition. The zero value is empty and ready; it is not
// safe for concurrent use.
type HeldReports map[int32]HeldReport

// Apply keeps h as its partition's latest report (a tombstone forgets the
// partition).
func (hs HeldReports) Apply(h HeldReport) {
	if len(h.Routes) == 0 {
		delete(hs, h.Partition)
		return
	}
	hs[h.Partition] = h
}

// Routes adds up the reports younger than HeldStale at now by provider and
// route: entities and records waiting summed, the HeldTop held longest of
// all. Sorted by provider and route.
func (hs HeldReports) Routes(now time.Time) []HeldRoute {
	by := map[[2]string]*HeldRoute{}
	for _, h := range hs {
		if now.Sub(h.At) >= HeldStale {
			continue
		}
		for _, r := range h.Routes {
			k := [2]string{r.Provider, RouteOr(r.Route)}
			sum := by[k]
			if sum == nil {
				sum = &HeldRoute{Provider: k[0], Route: k[1]}
				by[k] = sum
			}
			sum.Entities += r.Entities
			sum.Waiting += r.Waiting
			for _, e := range r.Oldest {
				sum.KeepOldest(e)
			}
		}
	}
	out := make([]HeldRoute, 0, len(by))
	for _, r := range by {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b HeldRoute) int {
		return cmp.Or(cmp.Compare(a.Provider, b.Provider), cmp.Compare(a.Route, b.Route))
	})
	return out
}

// Clone is a copy of hs that later Apply calls on hs do not change.
func (hs HeldReports) Clone() HeldReports {
	out := HeldReports{}
	maps.Copy(out, hs)
	return out
}

// Reports are the processors' reports a reader of the control topic
// keeps: their breakers, the entities held in their partitions and the
// trial calls of auto-paused routes. Make one with NewReports; it is not
// safe for concurrent use.
type Reports struct {
	Breakers Breakers
	Held     HeldReports
	Trials   Trials
}

// NewReports is an empty Reports.
func NewReports() Reports {
	return Reports{Breakers: Breakers{}, Held: HeldReports{}, Trials: Trials{}}
}

// Appliers keeps every report in rs, and hands settings to setting.
func (rs Reports) Appliers(setting func(Setting)) Appliers {
	return Appliers{Setting: setting, Breaker: rs.Breakers.Apply, Held: rs.Held.Apply, Trial: rs.Trials.Apply}
}

// Clone is a copy of rs that later reports kept in rs do not change.
func (rs Reports) Clone() Reports {
	return Reports{Breakers: rs.Breakers.Clone(), Held: rs.Held.Clone(), Trials: rs.Trials.Clone()}
}
