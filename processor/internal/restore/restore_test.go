package restore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/pkg/testkit/proctest"
	"github.com/hookline/hookline/pkg/topics"
	"github.com/hookline/hookline/processor/internal/state"
)

// The tests' state records: "exp=<RFC 3339 time>" or "exp=never"; anything
// else does not decode. never is the state that never expires, nv() its bytes.
const never = "exp=never"

func nv() []byte { return []byte(never) }

func val(exp time.Time) []byte {
	if exp.IsZero() {
		return nv()
	}
	return []byte("exp=" + exp.UTC().Format(time.RFC3339Nano))
}

func decode(v []byte) ([]byte, time.Time, error) {
	s, ok := strings.CutPrefix(string(v), "exp=")
	if !ok {
		return nil, time.Time{}, fmt.Errorf("not a test state: %q", v)
	}
	if s == "never" {
		return v, time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return v, t, err
}

// env is one test's changelog topic on the real broker.
type env struct {
	brokers []string
	topic   string
	adm     *kadm.Client
}

// mustEnv creates a changelog topic of 3 partitions (compact,delete) under a
// fresh prefix (kafkatest.Prefix: deleted at the end of the test).
func mustEnv(tb testing.TB, partitions int32) *env {
	tb.Helper()
	brokers := kafkatest.Brokers(tb)
	e := &env{
		brokers: brokers,
		topic:   topics.NewNames(kafkatest.Prefix(tb), nil).Changelog,
		adm:     kadm.NewClient(kafkatest.Client(tb, brokers)),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cleanup := "compact,delete"
	resp, err := e.adm.CreateTopic(ctx, partitions, 1, map[string]*string{"cleanup.policy": &cleanup}, e.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		tb.Fatalf("create %s: %v", e.topic, err)
	}
	return e // kafkatest.Prefix's clean-up deletes the topic
}

func (e *env) config(logger *slog.Logger) Config {
	return Config{
		Topic: e.topic,
		NewClient: func(opts ...kgo.Opt) (*kgo.Client, error) {
			all, err := kafkaconf.Config{Brokers: e.brokers}.Opts(opts...)
			if err != nil {
				return nil, err
			}
			return kgo.NewClient(all...)
		},
		Decode: decode,
		Logger: logger,
	}
}

// mustFixture is a changelog topic of 3 partitions and a producer for it.
func mustFixture(tb testing.TB) (*env, *kgo.Client) {
	tb.Helper()
	e := mustEnv(tb, 3)
	return e, e.producer(tb)
}

// producer is a transactional producer writing to chosen partitions.
func (e *env) producer(tb testing.TB) *kgo.Client {
	tb.Helper()
	return kafkatest.Client(tb, e.brokers,
		kgo.TransactionalID(fmt.Sprintf("%stx-%d", e.topic, time.Now().UnixNano())),
		kgo.DefaultProduceTopic(e.topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionTimeout(60*time.Second),
	)
}

// rec is a changelog record for partition p; a nil value is a tombstone.
func rec(p int32, key string, value []byte) *kgo.Record {
	return &kgo.Record{Partition: p, Key: []byte(key), Value: value}
}

// begin starts a transaction on cl and produces rs in it, left open.
func begin(tb testing.TB, cl *kgo.Client, rs ...*kgo.Record) {
	tb.Helper()
	if err := cl.BeginTransaction(); err != nil {
		tb.Fatalf("begin: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		tb.Fatalf("produce: %v", err)
	}
}

func end(tb testing.TB, cl *kgo.Client, commit bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		tb.Fatalf("end transaction (commit=%t): %v", commit, err)
	}
}

// txn writes rs in one transaction, committed or aborted.
func txn(tb testing.TB, cl *kgo.Client, commit bool, rs ...*kgo.Record) {
	tb.Helper()
	begin(tb, cl, rs...)
	end(tb, cl, commit)
}

// hwm is the partition's high watermark.
// stableEnd is partition p's end once no transaction is open on it: its
// last stable offset once that reaches the high watermark, past the commit
// markers (which the coordinator writes after EndTxn answered). What a
// restore reads to; waits up to 10 s and says what it saw.
func (e *env) stableEnd(tb testing.TB, p int32) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		hwm := e.hwm(tb, p)
		offs, err := e.adm.ListCommittedOffsets(ctx, e.topic)
		if err != nil {
			tb.Fatal(err)
		}
		lso, ok := offs.Lookup(e.topic, p)
		if ok && lso.Err == nil && lso.Offset >= hwm {
			return lso.Offset
		}
		if ctx.Err() != nil {
			tb.Fatalf("partition %d not stable after 10 s: last stable offset %d (%v), high watermark %d", p, lso.Offset, lso.Err, hwm)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) hwm(tb testing.TB, p int32) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := e.adm.ListEndOffsets(ctx, e.topic)
	if err != nil {
		tb.Fatal(err)
	}
	o, ok := offs.Lookup(e.topic, p)
	if !ok || o.Err != nil {
		tb.Fatalf("end offset of %d: %v", p, o.Err)
	}
	return o.Offset
}

func mustStore(tb testing.TB) *state.Store {
	tb.Helper()
	st, err := state.Open(state.Options{InMemory: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

func mustRestore(tb testing.TB, cfg Config, st *state.Store, p int32) Stats {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Partition(ctx, cfg, st, p)
	if err != nil {
		tb.Fatalf("restore partition %d: %v", p, err)
	}
	tb.Logf("restore: %+v", s)
	return s
}

// wantState checks the store's partition p: want maps key -> value, "" for absent.
func wantState(tb testing.TB, st *state.Store, p int32, want map[string]string) {
	tb.Helper()
	for k, w := range want {
		v, ok, err := st.Get(p, k)
		if err != nil {
			tb.Fatal(err)
		}
		if w == "" && ok {
			tb.Errorf("key %q = %q, want absent", k, v)
		}
		if w != "" && string(v) != w {
			tb.Errorf("key %q = %q (ok=%t), want %q", k, v, ok, w)
		}
	}
}

func wantCheckpoint(tb testing.TB, st *state.Store, p int32, want int64) {
	tb.Helper()
	got, ok, err := st.Checkpoint(p)
	if err != nil || !ok || got != want {
		tb.Errorf("checkpoint of %d = %d (ok=%t, err=%v), want %d", p, got, ok, err, want)
	}
}

// TestRestore: only committed states arrive (not an aborted transaction's,
// not other partitions'), restoring again from the checkpoint reads nothing,
// and records written later are read incrementally.
func TestRestore(t *testing.T) {
	e, cl := mustFixture(t)
	hour := time.Now().Add(time.Hour)
	const p = 1
	v1, v2, v3 := val(hour), val(hour.Add(time.Minute)), val(time.Time{})
	txn(t, cl, true, rec(p, "a", v1), rec(p, "b", v1), rec(p, "c", v1), rec(0, "other", v1), rec(2, "other", v1))
	txn(t, cl, false, rec(p, "a", []byte("exp=aborted")), rec(p, "d", v1))
	txn(t, cl, true, rec(p, "b", v2), rec(p, "c", nil), rec(p, "e", v3))

	st := mustStore(t)
	cfg := e.config(nil)
	s := mustRestore(t, cfg, st, p)
	end1 := e.stableEnd(t, p)
	if s.Records != 6 || s.Applied != 6 || s.Expired != 0 || s.Skipped != 0 || s.From != 0 || s.To != end1 || s.Rebuilt {
		t.Errorf("stats = %+v, want 6 records applied, from 0 to %d", s, end1)
	}
	wantState(t, st, p, map[string]string{"a": string(v1), "b": string(v2), "c": "", "d": "", "e": string(v3)})
	wantState(t, st, 0, map[string]string{"other": ""})
	wantCheckpoint(t, st, p, end1)
	if n := st.Keys(); n != 3 {
		t.Errorf("Keys() = %d, want 3", n)
	}

	s = mustRestore(t, cfg, st, p)
	if s.Records != 0 || s.From != end1 || s.To != end1 {
		t.Errorf("restore from the checkpoint: %+v, want no record, from = to = %d", s, end1)
	}

	txn(t, cl, true, rec(p, "a", v3), rec(p, "f", v1))
	s = mustRestore(t, cfg, st, p)
	end2 := e.stableEnd(t, p)
	if s.Records != 2 || s.From != end1 || s.To != end2 {
		t.Errorf("incremental restore: %+v, want 2 records from %d to %d", s, end1, end2)
	}
	wantState(t, st, p, map[string]string{"a": string(v3), "b": string(v2), "f": string(v1)})
	wantCheckpoint(t, st, p, end2)
	if n := st.Keys(); n != 4 {
		t.Errorf("Keys() = %d, want 4", n)
	}
}

// TestRestoreRebuild: a checkpoint ahead of the partition's end (topic
// recreated) or below its log start (retention) wipes the partition and
// reads it from the log start.
func TestRestoreRebuild(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 2
	txn(t, cl, true, rec(p, "a", nv()), rec(p, "b", nv()))
	st := mustStore(t)
	var logs bytes.Buffer
	cfg := e.config(slog.New(slog.NewTextHandler(&logs, nil)))
	mustRestore(t, cfg, st, p)
	hwm := e.stableEnd(t, p)

	// Ahead: as if the topic had been recreated.
	if err := st.Apply([]state.Change{{Partition: p, Key: "ghost", Value: nv()}}, map[int32]int64{p: hwm + 100}); err != nil {
		t.Fatal(err)
	}
	s := mustRestore(t, cfg, st, p)
	if !s.Rebuilt || s.From != 0 || s.To != hwm || s.Records != 2 {
		t.Errorf("checkpoint ahead: %+v, want rebuilt from 0 to %d", s, hwm)
	}
	wantState(t, st, p, map[string]string{"a": never, "b": never, "ghost": ""})
	wantCheckpoint(t, st, p, hwm)
	if !strings.Contains(logs.String(), "ahead") {
		t.Errorf("no warning about the checkpoint ahead: %s", logs.String())
	}

	// Below the log start: records before it were deleted.
	txn(t, cl, true, rec(p, "c", nv()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logStart := hwm // delete a and b (and the first commit marker)
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: e.topic, Partition: p, At: logStart})
	resp, err := e.adm.DeleteRecords(ctx, del)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if err := st.Apply(nil, map[int32]int64{p: 1}); err != nil {
		t.Fatal(err)
	}
	s = mustRestore(t, cfg, st, p)
	hwm = e.stableEnd(t, p)
	if !s.Rebuilt || s.From != logStart || s.To != hwm || s.Records != 1 {
		t.Errorf("checkpoint below the log start: %+v, want rebuilt from %d to %d, 1 record", s, logStart, hwm)
	}
	wantState(t, st, p, map[string]string{"a": "", "b": "", "c": never})
}

// TestRestoreSkips: an expired record deletes the older value of its key
// and is counted Expired; an undecodable record or one without key is
// skipped (Skipped) with a warning naming its offset, and the restore goes on.
func TestRestoreSkips(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 0
	now := time.Now()
	txn(t, cl, true, rec(p, "old", val(now.Add(time.Hour))), rec(p, "keep", val(now.Add(time.Hour))))
	txn(t, cl, true,
		rec(p, "old", val(now.Add(-time.Minute))),       // expired: deletes the older value
		rec(p, "born-dead", val(now.Add(-time.Minute))), // expired: never stored
		rec(p, "keep", []byte(`{"v":99}`)),              // undecodable: skipped
		rec(p, "", val(now.Add(time.Hour))),             // no key: skipped
		rec(p, "after", val(now.Add(time.Hour))))
	st := mustStore(t)
	var logs bytes.Buffer
	cfg := e.config(slog.New(slog.NewTextHandler(&logs, nil)))
	cfg.Now = func() time.Time { return now }
	s := mustRestore(t, cfg, st, p)
	if s.Records != 7 || s.Applied != 3 || s.Expired != 2 || s.Skipped != 2 {
		t.Errorf("stats = %+v, want 7 records: 3 applied, 2 expired, 2 skipped", s)
	}
	wantState(t, st, p, map[string]string{"old": "", "born-dead": "", "keep": string(val(now.Add(time.Hour))), "after": string(val(now.Add(time.Hour)))})
	wantCheckpoint(t, st, p, e.stableEnd(t, p))
	if !strings.Contains(logs.String(), "undecodable") || !strings.Contains(logs.String(), "offset=5") {
		t.Errorf("no warning with the undecodable record's offset: %s", logs.String())
	}
}

// TestRestoreEmpty: an empty partition returns at once, with a checkpoint.
func TestRestoreEmpty(t *testing.T) {
	e := mustEnv(t, 3)
	st := mustStore(t)
	s := mustRestore(t, e.config(nil), st, 1)
	if s.Records != 0 || s.From != 0 || s.To != 0 {
		t.Errorf("stats = %+v, want nothing read", s)
	}
	if s.Duration > 2*time.Second {
		t.Errorf("empty partition took %s", s.Duration)
	}
	wantCheckpoint(t, st, 1, 0)
}

// TestRestoreAbortedTail: the partition ends with an aborted transaction,
// its abort marker the last offset; the restore reaches the end (no record
// is returned there) and finishes without waiting.
func TestRestoreAbortedTail(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 1
	txn(t, cl, true, rec(p, "a", nv()))
	txn(t, cl, false, rec(p, "b", nv()), rec(p, "c", nv()))
	st := mustStore(t)
	s := mustRestore(t, e.config(nil), st, p)
	hwm := e.stableEnd(t, p)
	if s.Records != 1 || s.To != hwm {
		t.Errorf("stats = %+v, want 1 record, to %d", s, hwm)
	}
	if s.Duration >= stallAfter {
		t.Errorf("took %s: the end was not seen from the abort marker", s.Duration)
	}
	wantState(t, st, p, map[string]string{"a": never, "b": "", "c": ""})
	wantCheckpoint(t, st, p, hwm)
}

// TestRestoreSettle: a transaction open when the restore starts is waited
// for, and its records are restored once it commits.
func TestRestoreSettle(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 2
	txn(t, cl, true, rec(p, "a", nv()))
	begin(t, cl, rec(p, "late", nv()))
	st := mustStore(t)
	cfg := e.config(nil)
	cfg.SettleTimeout = 30 * time.Second
	done := make(chan struct{})
	var s Stats
	var err error
	go func() {
		defer close(done)
		s, err = Partition(context.Background(), cfg, st, p)
	}()
	time.Sleep(700 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("restore returned before the open transaction ended: %+v, %v", s, err)
	default:
	}
	end(t, cl, true)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if s.Records != 2 {
		t.Errorf("stats = %+v, want 2 records", s)
	}
	wantState(t, st, p, map[string]string{"a": never, "late": never})
}

// TestRestoreSettleTimeout: a transaction left open past SettleTimeout: the
// restore warns and stops at the last stable offset; a later restore picks
// up the transaction once it commits.
func TestRestoreSettleTimeout(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 0
	txn(t, cl, true, rec(p, "a", nv()))
	// The commit marker is written by the coordinator after EndTxn
	// answered: wait for it (record and marker), or a loaded broker shows
	// the end before it.
	lso := e.stableEnd(t, p)
	begin(t, cl, rec(p, "open", nv()))
	st := mustStore(t)
	var logs bytes.Buffer
	cfg := e.config(slog.New(slog.NewTextHandler(&logs, nil)))
	cfg.SettleTimeout = 500 * time.Millisecond
	s := mustRestore(t, cfg, st, p)
	if s.Records != 1 || s.To != lso {
		t.Errorf("stats = %+v, want 1 record, to the last stable offset %d", s, lso)
	}
	if !strings.Contains(logs.String(), "settle timeout") {
		t.Errorf("no warning: %s", logs.String())
	}
	wantState(t, st, p, map[string]string{"a": never, "open": ""})

	end(t, cl, true)
	s = mustRestore(t, cfg, st, p)
	if s.Records != 1 || s.From != lso {
		t.Errorf("after the commit: %+v, want 1 record from %d", s, lso)
	}
	wantState(t, st, p, map[string]string{"open": never})
}

// TestRestoreHiddenAbort: the range ends in aborted data whose abort marker
// was written after another transaction began, so the marker lies past the
// last stable offset and the consumer returns nothing for the tail: the
// restore checks the range itself (drained) and finishes.
func TestRestoreHiddenAbort(t *testing.T) {
	e := mustEnv(t, 3)
	const p = 1
	a, c := e.producer(t), e.producer(t)
	txn(t, a, true, rec(p, "first", nv()))
	begin(t, a, rec(p, "aborted", nv()))
	lso := e.hwm(t, p) // the aborted record ends here...
	begin(t, c, rec(p, "open", nv()))
	end(t, a, false) // ...its marker lands after "open"
	st := mustStore(t)
	cfg := e.config(nil)
	cfg.SettleTimeout = 200 * time.Millisecond
	s := mustRestore(t, cfg, st, p)
	if s.Records != 1 || s.To != lso {
		t.Errorf("stats = %+v, want 1 record, to %d", s, lso)
	}
	wantState(t, st, p, map[string]string{"first": never, "aborted": "", "open": ""})

	end(t, c, true)
	s = mustRestore(t, cfg, st, p)
	if s.Records != 1 || s.To != e.stableEnd(t, p) {
		t.Errorf("after the commit: %+v, want 1 record", s)
	}
	wantState(t, st, p, map[string]string{"open": never, "aborted": ""})
}

// TestRestoreCancel: a cancelled context ends the restore promptly with
// ctx.Err(), while it waits for transactions and while it reads; what it
// applied holds with its checkpoint.
func TestRestoreCancel(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 0
	var rs []*kgo.Record
	for i := range 3000 {
		rs = append(rs, rec(p, fmt.Sprintf("k%04d", i), nv()))
	}
	txn(t, cl, true, rs...)

	t.Run("reading", func(t *testing.T) {
		st := mustStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg := e.config(nil)
		cfg.BatchSize = 100
		var once sync.Once
		n := 0
		cfg.Decode = func(b []byte) ([]byte, time.Time, error) {
			if n++; n == 250 {
				once.Do(cancel)
			}
			return decode(b)
		}
		s := wantCanceled(t, ctx, cfg, st, p, 5*time.Second)
		cp, ok, _ := st.Checkpoint(p)
		if !ok || cp != s.To || cp < 200 || cp > 300 {
			t.Errorf("checkpoint %d (ok=%t), stats %+v: want the last batch applied before the cancel", cp, ok, s)
		}
		// Everything below the checkpoint is there.
		wantState(t, st, p, map[string]string{"k0000": never, fmt.Sprintf("k%04d", cp-1): never})
	})

	t.Run("settling", func(t *testing.T) {
		begin(t, cl, rec(p, "open", nv()))
		defer end(t, cl, false)
		st := mustStore(t)
		ctx, cancel := context.WithCancel(context.Background())
		cfg := e.config(nil)
		cfg.SettleTimeout = time.Minute
		time.AfterFunc(300*time.Millisecond, cancel)
		wantCanceled(t, ctx, cfg, st, p, 3*time.Second)
	})
}

// wantCanceled runs a restore that ctx cancels and checks it returns
// context.Canceled within limit.
func wantCanceled(tb testing.TB, ctx context.Context, cfg Config, st *state.Store, p int32, limit time.Duration) Stats {
	tb.Helper()
	start := time.Now()
	s, err := Partition(ctx, cfg, st, p)
	if !errors.Is(err, context.Canceled) {
		tb.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > limit {
		tb.Errorf("took %s to end after the cancel", d)
	}
	return s
}

func TestConfigErrors(t *testing.T) {
	st := mustStore(t)
	for _, cfg := range []Config{
		{NewClient: func(...kgo.Opt) (*kgo.Client, error) { return nil, nil }, Decode: decode},
		{Topic: "t", Decode: decode},
		{Topic: "t", NewClient: func(...kgo.Opt) (*kgo.Client, error) { return nil, nil }},
	} {
		if _, err := Partition(context.Background(), cfg, st, 0); err == nil {
			t.Errorf("config %+v: no error", cfg)
		}
	}
}

// TestRestoreMissingTopic: a changelog topic that does not exist is an
// error after a few seconds of retries, not a hang.
func TestRestoreMissingTopic(t *testing.T) {
	e := &env{brokers: kafkatest.Brokers(t), topic: kafkatest.Prefix(t) + "missing"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := Partition(ctx, e.config(nil), mustStore(t), 0); err == nil || ctx.Err() != nil {
		t.Fatalf("err = %v after %s, want an error before the test's deadline", err, time.Since(start))
	} else {
		t.Logf("after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
}

// changelogMix writes to partition p n records over transactions of 100,
// with overwrites, tombstones, expired states, a record that does not
// decode and an aborted transaction, and returns the keys it used.
func changelogMix(tb testing.TB, cl *kgo.Client, p int32, n int) []string {
	tb.Helper()
	now := time.Now()
	keys := make([]string, 0, n/3)
	for i := range n / 3 {
		keys = append(keys, fmt.Sprintf("key-%05d", i))
	}
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, rec(p, keys[(i*7)%len(keys)], mixValue(i, now)))
		if len(rs) == 100 {
			txn(tb, cl, true, rs...)
			rs = rs[:0]
		}
	}
	if len(rs) > 0 {
		txn(tb, cl, true, rs...)
	}
	txn(tb, cl, false, rec(p, keys[0], []byte("exp=aborted")))
	return keys
}

// mixValue is the value of the i-th record of a mixed changelog: a
// tombstone, an expired state, a record that does not decode, a state
// expiring later or one that never does.
func mixValue(i int, now time.Time) []byte {
	switch {
	case i%13 == 0:
		return nil // tombstone
	case i%17 == 0:
		return val(now.Add(-time.Minute)) // expired
	case i%19 == 0:
		return []byte("not a state")
	case i%2 == 0:
		return val(now.Add(time.Duration(i) * time.Minute))
	default:
		return nv()
	}
}

// sameStore checks that a and b hold the same value for every key and the
// same Keys count.
func sameStore(tb testing.TB, a, b *state.Store, p int32, keys []string) {
	tb.Helper()
	a.WaitKeys()
	b.WaitKeys()
	for _, k := range keys {
		va, oka, erra := a.Get(p, k)
		vb, okb, errb := b.Get(p, k)
		if erra != nil || errb != nil || oka != okb || string(va) != string(vb) {
			tb.Errorf("%s: %q (ok=%t, err=%v) against %q (ok=%t, err=%v)", k, va, oka, erra, vb, okb, errb)
		}
	}
	if ka, kb := a.Keys(), b.Keys(); ka != kb {
		tb.Errorf("Keys() = %d against %d", ka, kb)
	}
}

// TestRestoreBulkMatchesIncremental: a partition restored from scratch (the
// bulk writer) and the same partition restored incrementally from a
// checkpoint at offset 0 (Store.Apply per batch) hold the same states and
// the same Keys count, with the tracking of keys in the restore budget and
// without it.
func TestRestoreBulkMatchesIncremental(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 1
	keys := changelogMix(t, cl, p, 2000)
	hwm := e.stableEnd(t, p)
	cfg := e.config(nil)
	cfg.BatchSize = 150

	incr := mustStore(t)
	if err := incr.Apply(nil, map[int32]int64{p: 0}); err != nil {
		t.Fatal(err)
	}
	si := mustRestore(t, cfg, incr, p)
	if si.Bulk || si.To != hwm {
		t.Fatalf("incremental restore: %+v, want not bulk, to %d", si, hwm)
	}
	for _, memory := range []int64{0, 1} {
		bulk, err := state.Open(state.Options{InMemory: true, RestoreMemory: memory})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = bulk.Close() })
		sb := mustRestore(t, cfg, bulk, p)
		if !sb.Bulk || sb.To != hwm {
			t.Fatalf("bulk restore (budget %d): %+v, want bulk, to %d", memory, sb, hwm)
		}
		if sb.Records != si.Records || sb.Applied != si.Applied || sb.Expired != si.Expired || sb.Skipped != si.Skipped {
			t.Errorf("stats: bulk %+v, incremental %+v", sb, si)
		}
		sameStore(t, bulk, incr, p, keys)
		wantCheckpoint(t, bulk, p, hwm)
	}
}

// TestRestoreBulkResume: a bulk restore cancelled midway leaves a
// checkpoint covering what it wrote; restoring again resumes from it
// (incrementally) and ends with the store a restore in one go gives.
func TestRestoreBulkResume(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 2
	keys := changelogMix(t, cl, p, 3000)
	hwm := e.stableEnd(t, p)

	whole := mustStore(t)
	mustRestore(t, e.config(nil), whole, p)

	st := mustStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := e.config(nil)
	cfg.BatchSize = 100
	n := 0
	cfg.Decode = func(b []byte) ([]byte, time.Time, error) {
		if n++; n == 1200 {
			cancel()
		}
		return decode(b)
	}
	s := wantCanceled(t, ctx, cfg, st, p, 5*time.Second)
	cp, ok, err := st.Checkpoint(p)
	if err != nil || !ok || cp != s.To || cp <= 0 || cp >= hwm || !s.Bulk {
		t.Fatalf("after the cancel: checkpoint %d (ok=%t, err=%v), stats %+v: want a bulk checkpoint inside the range", cp, ok, err, s)
	}

	s = mustRestore(t, e.config(nil), st, p)
	if s.From != cp || s.To != hwm || s.Bulk || s.Rebuilt {
		t.Errorf("resume: %+v, want incremental from %d to %d", s, cp, hwm)
	}
	sameStore(t, st, whole, p, keys)
}

// TestRestoreBulkConcurrent: three partitions restored from scratch at
// once into one on-disk store, within a restore budget that holds two of
// them (the third waits), each bulk-loading with versions of its own, give
// what restoring each incrementally gives.
func TestRestoreBulkConcurrent(t *testing.T) {
	e, cl := mustFixture(t)
	keys := map[int32][]string{}
	for p := range int32(3) {
		keys[p] = changelogMix(t, cl, p, 1500)
	}
	cfg := e.config(nil)
	cfg.BatchSize = 200

	incr := mustStore(t)
	if err := incr.Apply(nil, map[int32]int64{0: 0, 1: 0, 2: 0}); err != nil {
		t.Fatal(err)
	}
	conc, err := state.Open(state.Options{Dir: t.TempDir(), RestoreMemory: 2 * (1500*512 + 1<<20)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conc.Close() })
	var wg sync.WaitGroup
	stats := make([]Stats, 3)
	for p := range int32(3) {
		mustRestore(t, cfg, incr, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var err error
			if stats[p], err = Partition(ctx, cfg, conc, p); err != nil {
				t.Errorf("restore %d: %v", p, err)
			}
		}()
	}
	wg.Wait()
	for p := range int32(3) {
		if !stats[p].Bulk || stats[p].To != e.stableEnd(t, p) {
			t.Errorf("partition %d: %+v, want a bulk restore to %d", p, stats[p], e.stableEnd(t, p))
		}
		sameStore(t, conc, incr, p, keys[p])
	}
}

// TestRestoreLogsProgress: a restore still running logs how far it is,
// offset by offset up to the end, with what is left.
func TestRestoreLogsProgress(t *testing.T) {
	e, cl := mustFixture(t)
	const p = 0
	// 20,000 records: a look at the clock every 4,096.
	rs := make([]*kgo.Record, 0, 20_000)
	for i := range cap(rs) {
		rs = append(rs, rec(p, fmt.Sprintf("k%d", i), nv()))
	}
	txn(t, cl, true, rs...)
	var logs proctest.Buffer
	cfg := e.config(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	cfg.ProgressEvery = time.Nanosecond // a line at every look at the clock
	s := mustRestore(t, cfg, mustStore(t), p)
	if s.Records != 20_000 {
		t.Fatalf("stats %+v: want the 20,000 records read", s)
	}
	// The end the restore read to, past the commit marker (which the
	// broker may not have written yet when the high watermark is asked).
	end := s.To
	var offsets []int64
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"restore in progress"`) {
			continue
		}
		var l struct {
			Offset      int64  `json:"offset"`
			End         int64  `json:"end"`
			Remaining   int64  `json:"remaining"`
			DonePercent int64  `json:"done_percent"`
			TimeLeft    string `json:"time_left"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("progress line %q: %v", line, err)
		}
		if l.End != end || l.Remaining != end-l.Offset || l.DonePercent < 0 || l.DonePercent > 100 || l.TimeLeft == "" {
			t.Errorf("progress line %q: want end %d, remaining = end - offset, a percentage and a time left", line, end)
		}
		offsets = append(offsets, l.Offset)
	}
	t.Logf("progress at offsets %v of %d", offsets, end)
	if len(offsets) < 2 || !slices.IsSorted(offsets) || offsets[len(offsets)-1] <= offsets[0] {
		t.Fatalf("progress at offsets %v: want several lines, moving towards %d", offsets, end)
	}
}
