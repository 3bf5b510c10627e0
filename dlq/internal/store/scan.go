package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoTopic is returned when the topic to read does not exist.
var ErrNoTopic = errors.New("topic does not exist")

// boundsTimeout bounds the ListOffsets requests of one read, so an
// unreachable cluster fails a command instead of hanging it.
const boundsTimeout = 30 * time.Second

// span is the part of one partition a scan reads: [start, end).
type span struct{ start, end int64 }

// bounds lists each partition's log start and last stable offset (the end a
// read_committed reader can reach now). Two ListOffsets requests.
func (s *Store) bounds(ctx context.Context, topic string) (map[int32]span, error) {
	ctx, cancel := context.WithTimeout(ctx, boundsTimeout)
	defer cancel()
	starts, err := s.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	ends, err := s.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	out := map[int32]span{}
	var errs []error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				errs = append(errs, fmt.Errorf("%s: %w", topic, ErrNoTopic))
			} else {
				errs = append(errs, fmt.Errorf("end offset of %s[%d]: %w", topic, o.Partition, o.Err))
			}
			return
		}
		st, ok := starts.Lookup(topic, o.Partition)
		if !ok || st.Err != nil {
			errs = append(errs, fmt.Errorf("start offset of %s[%d]: %v", topic, o.Partition, st.Err))
			return
		}
		out[o.Partition] = span{start: st.Offset, end: o.Offset}
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %w", topic, ErrNoTopic)
	}
	return out, nil
}

// scan reads every committed record of topic in spans, calling each in
// offset order per partition, and returns when every partition reached its
// end. Control records (kept so the reader sees its position move past
// transaction markers) are not passed on.
//
// A partition whose last records before the end are aborted writes never
// shows a record at end-1; nor does one whose leader stays unreachable. If no
// record arrives for s.stall, the scan stops and reports, through s.warn,
// each partition it could not read to the end.
func (s *Store) scan(ctx context.Context, topic string, spans map[int32]span, each func(*kgo.Record)) error {
	parts := map[int32]kgo.Offset{}
	next := map[int32]int64{}
	for p, sp := range spans {
		if sp.start < sp.end {
			parts[p] = kgo.NewOffset().At(sp.start)
			next[p] = sp.start
		}
	}
	if len(parts) == 0 {
		return nil
	}
	cl, err := s.newClient(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	for len(next) > 0 {
		pctx, cancel := context.WithTimeout(ctx, s.stall)
		fs := cl.PollFetches(pctx)
		stalled := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = errors.Join(ferr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
			}
		})
		if ferr != nil {
			return ferr
		}
		got := 0
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			p := fp.Partition
			for _, r := range fp.Records {
				// A record at offset x means everything before x was
				// delivered or filtered out (aborted writes, markers).
				n, ok := next[p]
				if !ok || r.Offset < n {
					continue
				}
				got++
				next[p] = r.Offset + 1
				if r.Offset < spans[p].end && !r.Attrs.IsControl() {
					each(r)
				}
			}
			if n, ok := next[p]; ok && n >= spans[p].end {
				delete(next, p)
				cl.PauseFetchPartitions(map[string][]int32{topic: {p}})
			}
		})
		if got == 0 && stalled {
			s.warnIncomplete(topic, spans, next)
			return nil
		}
	}
	return nil
}

func (s *Store) warnIncomplete(topic string, spans map[int32]span, next map[int32]int64) {
	ps := make([]int32, 0, len(next))
	for p := range next {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d (read up to offset %d of %d)", p, next[p], spans[p].end)
	}
	s.warn(fmt.Sprintf("%s: nothing arrived for %s, stopped reading partitions %s; the rest is either aborted writes or unreachable", topic, s.stall, b.String()))
}
