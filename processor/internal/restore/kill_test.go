package restore

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/testkit/kafkatest"
	"github.com/hookline/hookline/processor/internal/state"
)

// The restore process TestRestoreKilled kills: batches of 100 records, its
// store at state.MinMemory (Badger then takes a bulk write of about 6,500
// entries at a time), the decoder held at a record until it is killed.
const (
	killBatchSize = 100
	killMarker    = "KILLTEST"
	killKeys      = 6_000
)

// keyHistory is what a key's changelog records leave in the store, in
// offset order: after the record at off, the key holds value ("" for
// absent: a tombstone or an expired state).
type keyHistory []struct {
	off   int64
	value string
}

// at is the value the key holds once the records below cp are applied.
func (h keyHistory) at(cp int64) string {
	v := ""
	for _, r := range h {
		if r.off < cp {
			v = r.value
		}
	}
	return v
}

// allowed reports whether a store whose checkpoint is cp (none: -1) may
// hold got for the key: the value left by its last record below cp, or one
// left by a later record (written, not yet covered by a checkpoint).
func (h keyHistory) allowed(cp int64, got string) bool {
	if cp < 0 {
		return true
	}
	from := -1
	for i, r := range h {
		if r.off < cp {
			from = i
		}
	}
	if from < 0 && got == "" {
		return true // nothing below cp: the key may be absent
	}
	for _, r := range h[max(from, 0):] {
		if r.value == got {
			return true
		}
	}
	return false
}

// TestRestoreKilled kills a process (this test binary, re-executed) with
// SIGKILL in the middle of a bulk restore of 30,000 changelog records
// (overwrites, tombstones, expired states, records that do not decode, over
// 6,000 keys; mixValue) into an on-disk
// store, restarts the restore on the same directory, and compares every
// key with the changelog's last record for it.
//
//   - "before the first checkpoint": no checkpoint within the range (64
//     MiB apart); the restore is held in its decoder at the 20,000th
//     record it decodes once some of its writes are visible in the store,
//     and killed: no checkpoint may be stored, and the restart restores
//     from scratch.
//   - "after a checkpoint": a checkpoint every 384 KiB (about 14,000
//     records); killed when the restore, held at the 26,000th record it
//     decodes once it has written more past its checkpoint, says so: the
//     stored checkpoint is the logged one, every key holds what the
//     changelog gives at the checkpoint or a later value of it, and the
//     restart resumes from the checkpoint.
func TestRestoreKilled(t *testing.T) {
	e := mustEnv(t, 1)
	cl := e.producer(t)
	hist := killChangelog(t, cl, 30_000, killKeys)
	hwm := e.stableEnd(t, 0)

	for _, tc := range []struct {
		name            string
		checkpointBytes int64
		holdAt          int // the child's decoder stops at this record
		checkpoints     int // bulk checkpoints logged before the kill
	}{
		{"before the first checkpoint", 64 << 20, 20_000, 0},
		{"after a checkpoint", 384 << 10, 26_000, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			lines := runAndKill(t, e.brokers, e.topic, dir, tc.checkpointBytes, tc.holdAt)

			st, err := state.Open(state.Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			cp, ok, err := st.Checkpoint(0)
			if err != nil {
				t.Fatal(err)
			}
			logged := loggedCheckpoints(lines)
			switch {
			case len(logged) != tc.checkpoints:
				t.Fatalf("the restore logged checkpoints %v before the kill, want %d", logged, tc.checkpoints)
			case tc.checkpoints == 0 && ok:
				t.Fatalf("killed before any checkpoint, the store holds checkpoint %d", cp)
			case tc.checkpoints > 0 && (!ok || cp != logged[len(logged)-1]):
				t.Fatalf("checkpoint after the kill %d (ok=%t), want %d, the last logged", cp, ok, logged[len(logged)-1])
			}
			if !ok {
				cp = -1
			}
			// The store never claims more than it holds: each key holds
			// what the changelog gives at the checkpoint, or a later value.
			stored, ahead := 0, 0
			for k, h := range hist {
				got, present, err := st.Get(0, k)
				if err != nil {
					t.Fatal(err)
				}
				if present {
					stored++
				}
				if !h.allowed(cp, string(got)) {
					t.Errorf("after the kill, checkpoint %d: %s = %q, not what the changelog gives there or later", cp, k, got)
				}
				if cp >= 0 && string(got) != h.at(cp) {
					ahead++
				}
			}
			t.Logf("after the kill: checkpoint %d (ok=%t), %d keys stored, %d of them past the checkpoint", cp, ok, stored, ahead)
			if stored == 0 {
				t.Error("nothing stored at the kill: the restore was not killed in the middle")
			}

			s := mustRestore(t, e.config(nil), st, 0)
			switch {
			case ok && (s.Bulk || s.From != cp):
				t.Errorf("restart: %+v, want an incremental restore from %d", s, cp)
			case !ok && (!s.Bulk || s.From != 0):
				t.Errorf("restart: %+v, want a bulk restore from 0", s)
			}
			wantCheckpoint(t, st, 0, hwm)
			live := int64(0)
			for k, h := range hist {
				want := h[len(h)-1].value
				if want != "" {
					live++
				}
				got, present, err := st.Get(0, k)
				if err != nil || present != (want != "") || string(got) != want {
					t.Errorf("after the restart: %s = %q (ok=%t, err=%v), want %q", k, got, present, err, want)
				}
			}
			st.WaitKeys()
			if n := st.Keys(); n != live {
				t.Errorf("Keys() = %d, want %d", n, live)
			}
		})
	}
}

// killChangelog writes n records over keys keys to partition 0, in
// committed transactions of 500 (and one aborted), and returns each key's
// history.
func killChangelog(tb testing.TB, cl *kgo.Client, n, keys int) map[string]keyHistory {
	tb.Helper()
	now := time.Now()
	hist := map[string]keyHistory{}
	var rs []*kgo.Record
	flush := func(commit bool) {
		begin(tb, cl, rs...)
		end(tb, cl, commit)
		for _, r := range rs {
			if !commit {
				continue
			}
			var v string
			if r.Value != nil {
				_, exp, err := decode(r.Value)
				if err != nil {
					continue // skipped by restore: the key keeps what it had
				}
				if exp.IsZero() || exp.After(now) {
					v = string(r.Value)
				}
			}
			hist[string(r.Key)] = append(hist[string(r.Key)], struct {
				off   int64
				value string
			}{r.Offset, v})
		}
		rs = rs[:0]
	}
	for i := range n {
		k := fmt.Sprintf("key-%05d", (i*7919)%keys)
		v := mixValue(i, now)
		rs = append(rs, rec(0, k, v))
		if len(rs) == 500 {
			flush(true)
		}
		if i == n/2 {
			rs = append(rs, rec(0, k, []byte("exp=aborted")))
			flush(false)
		}
	}
	if len(rs) > 0 {
		flush(true)
	}
	return hist
}

// runAndKill runs the restore child on dir (reading brokers) and kills it
// with SIGKILL when it says it is held. It returns the lines it wrote.
func runAndKill(tb testing.TB, brokers []string, topic, dir string, checkpointBytes int64, holdAt int) []string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRestoreKilledChild$", "-test.v", "-test.timeout=2m")
	// The child reads the same broker, also when this process started
	// one in a container.
	cmd.Env = append(os.Environ(), "KAFKA_BROKERS="+strings.Join(brokers, ","),
		fmt.Sprintf("HOOKLINE_KILL_CHILD=%s,%s,%d,%d", topic, dir, checkpointBytes, holdAt))
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	killed := false
	var lines []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		if !killed && strings.HasPrefix(l, killMarker+" held") {
			if err := cmd.Process.Kill(); err != nil {
				tb.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		tb.Fatalf("the restore process ended (%v) before the kill:\n%s", err, strings.Join(lines, "\n"))
	}
	tb.Logf("killed at %q", lines[len(lines)-1])
	return lines
}

// loggedCheckpoints returns the offsets of the bulk checkpoints in lines.
func loggedCheckpoints(lines []string) []int64 {
	var out []int64
	for _, l := range lines {
		if !strings.Contains(l, "restore: bulk checkpoint") {
			continue
		}
		_, v, ok := strings.Cut(l, "offset=")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TestRestoreKilledChild is the process TestRestoreKilled kills: it
// restores partition 0 of the topic into the store in dir (at
// state.MinMemory), logging at debug level to stdout, with a checkpoint
// every checkpointBytes, and holds its decoder at record holdAt: it waits
// there until the store holds more than at the last checkpoint (some key
// changed; polled every 10 ms, for 20 s at most), says it is held, and
// waits to be killed.
func TestRestoreKilledChild(t *testing.T) {
	spec := os.Getenv("HOOKLINE_KILL_CHILD")
	if spec == "" {
		t.Skip("run by TestRestoreKilled")
	}
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		t.Fatalf("HOOKLINE_KILL_CHILD=%q", spec)
	}
	checkpointBytes, err1 := strconv.ParseInt(parts[2], 10, 64)
	holdAt, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil {
		t.Fatalf("HOOKLINE_KILL_CHILD=%q", spec)
	}
	st, err := state.Open(state.Options{Dir: parts[1], Memory: state.MinMemory})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{brokers: kafkatest.Brokers(t), topic: parts[0]}
	cfg := e.config(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug})))
	cfg.BatchSize, cfg.CheckpointBytes = killBatchSize, checkpointBytes
	// snapshot is what the keys hold now, at most the last checkpoint's.
	snapshot := func() map[string]string {
		m := map[string]string{}
		for i := range killKeys {
			k := fmt.Sprintf("key-%05d", i)
			if v, ok, err := st.Get(0, k); err == nil && ok {
				m[k] = string(v)
			}
		}
		return m
	}
	var mu sync.Mutex
	var atCheckpoint map[string]string
	cfg.Logger = slog.New(&onCheckpoint{Handler: cfg.Logger.Handler(), do: func() {
		m := snapshot()
		mu.Lock()
		defer mu.Unlock()
		atCheckpoint = m
	}})
	changed := func() bool {
		m := snapshot()
		mu.Lock()
		defer mu.Unlock()
		return !maps.Equal(m, atCheckpoint)
	}
	n := 0
	cfg.Decode = func(v []byte) ([]byte, time.Time, error) {
		if n++; n == holdAt {
			for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if changed() {
					break
				}
			}
			fmt.Printf("%s held at record %d\n", killMarker, n)
			time.Sleep(time.Hour) // until killed
		}
		return decode(v)
	}
	s, err := Partition(context.Background(), cfg, st, 0)
	fmt.Printf("%s restore ended: %+v, %v\n", killMarker, s, err)
}

// onCheckpoint is a slog handler that calls do after each bulk checkpoint
// line (in the restore's writer goroutine, while it waits).
type onCheckpoint struct {
	slog.Handler
	do func()
}

func (h *onCheckpoint) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message == "restore: bulk checkpoint" {
		h.do()
	}
	return err
}

func (h *onCheckpoint) WithAttrs(as []slog.Attr) slog.Handler {
	return &onCheckpoint{Handler: h.Handler.WithAttrs(as), do: h.do}
}

func (h *onCheckpoint) WithGroup(name string) slog.Handler {
	return &onCheckpoint{Handler: h.Handler.WithGroup(name), do: h.do}
}
