// Package balance is the processor group's partition balancer when warm
// standbys are on (HOOKLINE_STANDBY_REPLICAS > 0): cooperative and sticky
// like franz-go's cooperative-sticky, but it gives a partition that needs a
// new owner to the member whose state store is furthest along on it, and it
// names each partition's standbys, the members that keep its state warm.
//
// Each member tells the leader, in its join metadata's UserData, the next
// changelog offset its store holds for every partition (its checkpoints).
// The leader:
//
//  1. keeps each member's partitions while it has room (sticky);
//  2. gives every other partition to the member with room whose store is
//     furthest along on it (the standby that kept it warm), else to the one
//     with the fewest partitions;
//  3. names up to N standbys per partition, never its owner, preferring the
//     members furthest along on it, then the ones with the fewest standbys;
//  4. hands partitions over cooperatively (BalancePlan.AdjustCooperative):
//     a partition moving between members is first revoked, then assigned in
//     the next rebalance.
//
// Each member's standbys travel in its assignment's UserData; the member
// learns them in ParseSyncAssignment (OnStandbys).
package balance

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Protocol is the group protocol's name.
const Protocol = "hookline-standby"

// Balancer is a kgo.GroupBalancer (see the package doc).
type Balancer struct {
	// Standbys is how many standbys each partition gets (N).
	Standbys int
	// Checkpoints returns this member's store checkpoints: partition -> the
	// next changelog offset it holds (only partitions it holds any of).
	Checkpoints func() map[int32]int64
	// OnStandbys receives this member's standby partitions per topic after
	// every rebalance.
	OnStandbys func(map[string][]int32)
}

var _ kgo.GroupBalancer = (*Balancer)(nil)

// memberData is a member's join UserData.
type memberData struct {
	Checkpoints map[int32]int64 `json:"checkpoints"`
}

// assignmentData is a member's assignment UserData.
type assignmentData struct {
	Standbys map[string][]int32 `json:"standbys"`
}

func (*Balancer) ProtocolName() string { return Protocol }
func (*Balancer) IsCooperative() bool  { return true }

// JoinGroupMetadata is the consumer protocol's metadata with the partitions
// owned (cooperative) and the checkpoints in UserData.
func (b *Balancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for topic, parts := range current {
		o := kmsg.NewConsumerMemberMetadataOwnedPartition()
		o.Topic, o.Partitions = topic, parts
		meta.OwnedPartitions = append(meta.OwnedPartitions, o)
	}
	sort.Slice(meta.OwnedPartitions, func(i, j int) bool { return meta.OwnedPartitions[i].Topic < meta.OwnedPartitions[j].Topic })
	var d memberData
	if b.Checkpoints != nil {
		d.Checkpoints = b.Checkpoints()
	}
	meta.UserData, _ = json.Marshal(d) // a map of numbers always marshals
	return meta.AppendTo(nil)
}

// ParseSyncAssignment reads the partitions assigned and hands the standbys
// to OnStandbys.
func (b *Balancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("read assignment: %w", err)
	}
	out := map[string][]int32{}
	for _, t := range a.Topics {
		out[t.Topic] = t.Partitions
	}
	var d assignmentData
	if len(a.UserData) > 0 {
		if err := json.Unmarshal(a.UserData, &d); err != nil {
			return nil, fmt.Errorf("read standbys of the assignment: %w", err)
		}
	}
	if b.OnStandbys != nil {
		b.OnStandbys(d.Standbys)
	}
	return out, nil
}

// MemberBalancer is the leader's side: franz-go's consumer balancer over
// the joined members, balancing with Balance.
func (b *Balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// member is one member as the leader sees it.
type member struct {
	m           *kmsg.JoinGroupResponseMember
	generation  int32
	topics      map[string]bool
	owned       map[string][]int32
	checkpoints map[int32]int64
	assigned    map[string][]int32
	standbys    map[string][]int32
}

func (m *member) count() int {
	n := 0
	for _, ps := range m.assigned {
		n += len(ps)
	}
	return n
}

// Balance assigns every partition of every topic (see the package doc).
func (b *Balancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	var ms []*member
	cb.EachMember(func(jm *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		m := &member{m: jm, generation: meta.Generation, topics: map[string]bool{}, owned: map[string][]int32{}, assigned: map[string][]int32{}, standbys: map[string][]int32{}}
		for _, t := range meta.Topics {
			m.topics[t] = true
		}
		for _, o := range meta.OwnedPartitions {
			m.owned[o.Topic] = o.Partitions
		}
		var d memberData
		if json.Unmarshal(meta.UserData, &d) == nil {
			m.checkpoints = d.Checkpoints
		}
		ms = append(ms, m)
	})
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, topic := range names {
		b.balanceTopic(ms, topic, topics[topic])
	}
	plan := cb.NewPlan()
	for _, m := range ms {
		for topic, parts := range m.assigned {
			plan.AddPartitions(m.m, topic, parts)
		}
	}
	plan.AdjustCooperative(cb)
	return &assignment{plan: plan, members: ms}
}

// balanceTopic assigns one topic's partitions among the members that
// subscribe to it, and names their standbys.
func (b *Balancer) balanceTopic(all []*member, topic string, partitions int32) {
	var ms []*member
	for _, m := range all {
		if m.topics[topic] {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 || partitions <= 0 {
		return
	}
	base, extra := int(partitions)/len(ms), int(partitions)%len(ms)
	big := 0 // members holding base+1
	room := func(m *member) bool {
		n := len(m.assigned[topic])
		return n < base || n == base && big < extra
	}
	take := func(m *member, p int32) {
		if len(m.assigned[topic]) == base {
			big++
		}
		m.assigned[topic] = append(m.assigned[topic], p)
	}
	owner := make([]*member, partitions)
	// 1. Sticky: each keeps what it owns while it has room. A partition two
	// members claim stays with the claim of the later generation (KIP-792:
	// the other missed a rebalance).
	claim := make([]*member, partitions)
	for _, m := range ms {
		for _, p := range m.owned[topic] {
			if p >= 0 && p < partitions && (claim[p] == nil || m.generation > claim[p].generation) {
				claim[p] = m
			}
		}
	}
	for _, m := range ms {
		for _, p := range m.owned[topic] {
			if p >= 0 && p < partitions && claim[p] == m && owner[p] == nil && room(m) {
				owner[p] = m
				take(m, p)
			}
		}
	}
	// 2. The rest to the member with room furthest along on it.
	for p := int32(0); p < partitions; p++ {
		if owner[p] != nil {
			continue
		}
		var best *member
		for _, m := range ms {
			if !room(m) {
				continue
			}
			if best == nil || better(m, best, p, topic, func(m *member) int { return len(m.assigned[topic]) }) {
				best = m
			}
		}
		owner[p] = best
		take(best, p)
	}
	// 3. Standbys: up to N per partition, never its owner.
	n := min(b.Standbys, len(ms)-1)
	for p := int32(0); p < partitions; p++ {
		chosen := map[*member]bool{owner[p]: true}
		for range n {
			var best *member
			for _, m := range ms {
				if chosen[m] {
					continue
				}
				if best == nil || better(m, best, p, topic, func(m *member) int { return len(m.standbys[topic]) }) {
					best = m
				}
			}
			chosen[best] = true
			best.standbys[topic] = append(best.standbys[topic], p)
		}
	}
	for _, m := range ms {
		slices.Sort(m.assigned[topic])
		slices.Sort(m.standbys[topic])
	}
}

// better reports whether a is a better home for partition p than b: its
// store is further along on p, or as far and load(a) is smaller. Ties keep
// b (the members come sorted).
func better(a, b *member, p int32, topic string, load func(*member) int) bool {
	ca, cb := a.checkpoints[p], b.checkpoints[p]
	if ca != cb {
		return ca > cb
	}
	return load(a) < load(b)
}

// assignment is the plan with each member's standbys in its UserData.
type assignment struct {
	plan    *kgo.BalancePlan
	members []*member
}

func (a *assignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	byID := a.plan.AsMemberIDMap()
	out := make([]kmsg.SyncGroupRequestGroupAssignment, 0, len(a.members))
	for _, m := range a.members {
		ca := kmsg.NewConsumerMemberAssignment()
		topics := make([]string, 0, len(byID[m.m.MemberID]))
		for t := range byID[m.m.MemberID] {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		for _, t := range topics {
			at := kmsg.NewConsumerMemberAssignmentTopic()
			at.Topic = t
			at.Partitions = slices.Sorted(slices.Values(byID[m.m.MemberID][t]))
			ca.Topics = append(ca.Topics, at)
		}
		ca.UserData, _ = json.Marshal(assignmentData{Standbys: m.standbys})
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = m.m.MemberID
		sa.MemberAssignment = ca.AppendTo(nil)
		out = append(out, sa)
	}
	return out
}
