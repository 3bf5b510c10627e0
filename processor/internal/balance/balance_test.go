package balance

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const raw = "webhooks.raw"

// joined is one member as it joins: what it owns and its checkpoints.
type joined struct {
	id          string
	gen         int32
	owned       []int32
	checkpoints map[int32]int64
}

// balance runs the leader's side over members and returns, per member id,
// its assigned partitions and its standbys.
func balance(t *testing.T, standbys int, partitions int32, js ...joined) (assigned, standby map[string][]int32) {
	t.Helper()
	var members []kmsg.JoinGroupResponseMember
	for _, j := range js {
		b := &Balancer{Checkpoints: func() map[int32]int64 { return j.checkpoints }}
		meta := b.JoinGroupMetadata([]string{raw}, map[string][]int32{raw: j.owned}, j.gen)
		m := kmsg.NewJoinGroupResponseMember()
		m.MemberID, m.ProtocolMetadata = j.id, meta
		members = append(members, m)
	}
	lead := &Balancer{Standbys: standbys}
	gmb, _, err := lead.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := gmb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{raw: partitions})
	if err != nil {
		t.Fatal(err)
	}
	assigned, standby = map[string][]int32{}, map[string][]int32{}
	for _, sa := range into.IntoSyncAssignment() {
		var got map[string][]int32
		follower := &Balancer{OnStandbys: func(s map[string][]int32) { got = s }}
		parts, err := follower.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		assigned[sa.MemberID], standby[sa.MemberID] = parts[raw], got[raw]
	}
	return assigned, standby
}

func TestFreshGroupSpreadsEvenlyWithStandbysElsewhere(t *testing.T) {
	a, s := balance(t, 1, 6, joined{id: "a"}, joined{id: "b"}, joined{id: "c"})
	seen := map[int32]string{}
	for id, ps := range a {
		if len(ps) != 2 {
			t.Errorf("%s has %v, want 2 partitions", id, ps)
		}
		for _, p := range ps {
			seen[p] = id
		}
	}
	if len(seen) != 6 {
		t.Fatalf("partitions assigned %v, want all 6 once", a)
	}
	standbys := 0
	for id, ps := range s {
		for _, p := range ps {
			standbys++
			if seen[p] == id {
				t.Errorf("%s is owner and standby of %d", id, p)
			}
		}
	}
	if standbys != 6 {
		t.Fatalf("standbys %v, want one per partition", s)
	}
}

// A member gone: its partition goes to the member whose store is furthest
// along on it (its standby) while that one has room, even when another
// member holds fewer; the members keep what they own.
func TestOrphansGoToTheWarmStandby(t *testing.T) {
	a, _ := balance(t, 1, 5,
		joined{id: "b", gen: 4, owned: []int32{1, 2}, checkpoints: map[int32]int64{0: 900, 1: 1000, 2: 1000}},
		joined{id: "c", gen: 4, owned: []int32{3}, checkpoints: map[int32]int64{0: 10, 3: 1000}},
	)
	if !slices.Equal(a["b"], []int32{0, 1, 2}) || !slices.Equal(a["c"], []int32{3, 4}) {
		t.Fatalf("assigned %v, want b [0 1 2] (warm on 0) and c [3 4]", a)
	}
}

// Standbys prefer members already warm on the partition.
func TestStandbysPreferWarmMembers(t *testing.T) {
	_, s := balance(t, 1, 2,
		joined{id: "a", gen: 2, owned: []int32{0, 1}},
		joined{id: "b", gen: 2},
		joined{id: "c", gen: 2, checkpoints: map[int32]int64{0: 500, 1: 500}},
	)
	// a keeps one of the two (2 partitions, 3 members: at most 1 each).
	if !slices.Contains(s["c"], 0) && !slices.Contains(s["c"], 1) {
		t.Fatalf("standbys %v: c, warm on both, keeps neither", s)
	}
}

// A partition two members claim stays with the later generation's claim.
func TestStaleClaimLoses(t *testing.T) {
	a, _ := balance(t, 0, 2,
		joined{id: "a", gen: 3, owned: []int32{0}},
		joined{id: "b", gen: 5, owned: []int32{0, 1}},
	)
	if slices.Contains(a["a"], 0) {
		t.Fatalf("assigned %v: the stale claim (generation 3) kept partition 0", a)
	}
}

func TestMoreStandbysThanMembers(t *testing.T) {
	_, s := balance(t, 3, 4, joined{id: "a"}, joined{id: "b"})
	for id, ps := range s {
		if len(ps) != 2 {
			t.Errorf("%s standbys %v, want the 2 partitions it does not own", id, ps)
		}
	}
}

func TestUserDataRoundTrip(t *testing.T) {
	b := &Balancer{Checkpoints: func() map[int32]int64 { return map[int32]int64{3: 42} }}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b.JoinGroupMetadata([]string{raw}, nil, 1)); err != nil {
		t.Fatal(err)
	}
	var d memberData
	if err := json.Unmarshal(meta.UserData, &d); err != nil || d.Checkpoints[3] != 42 {
		t.Fatalf("user data %s (%v), want checkpoint 3 -> 42", meta.UserData, err)
	}
	_ = fmt.Sprint
}
