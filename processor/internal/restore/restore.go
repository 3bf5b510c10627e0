// Package restore brings one partition of the Badger state (package state)
// up to date with the changelog topic before the processor resumes the
// partition (DESIGN.md §6): it reads the changelog partition, read_committed,
// from the stored checkpoint to the end that every transaction begun before
// the call has reached, and applies it in batches, each with its checkpoint.
//
// Two write paths. A partition restored from scratch (no checkpoint: a new
// owner, a wiped, rebuilt or corrupt store) goes through state.Loader, the
// bulk path: Badger's backup-restore writer (badger.KVLoader: no
// transaction, no read before each write, only the last change of a key in
// each batch), a checkpoint every CheckpointBytes (64 MiB) and at the end,
// each only once every write before it is in Badger. A partition with a
// checkpoint is restored incrementally, one Store.Apply (states and
// checkpoint in one transaction) per batch. Both store the same states; a
// restore cut short, by a cancel or by SIGKILL, leaves either a checkpoint
// that the next one resumes from (the store may hold more than it claims,
// never less) or none (the next one wipes the partition and starts over):
// TestRestoreKilled.
//
// The work is a pipeline of goroutines: franz-go's fetch (decompression),
// this package's loop (Decode of each record into a batch), a writer
// (Loader.Add or Store.Apply of the batch before), and Badger's write
// goroutine (write-ahead log and memtable insert) with its memtable
// flushes and compactions behind it.
//
// Costs of one Partition call: one franz-go client of its own (a metadata
// request, a connection to the partition leader, closed on return), a few
// ListOffsets requests (more while waiting for open transactions to settle),
// and a fetch of the range. Fetches are up to 8 MiB for the partition; the
// client buffers at most one fetch while the previous one is decoded, so the
// memory is about 2 x 8 MiB of records plus two batches of changes (BatchSize
// each: one decoded while a goroutine writes the other) plus the bulk
// writes in flight (4 requests of up to 15% of a memtable): about 32 MiB,
// reserved from the store's restore budget (three eighths of
// state.Options.Memory, HOOKLINE_STATE_MEMORY: 48 MiB by default) before
// reading, so one partition reads at full speed, with room left for a bulk
// load's key tracking, and the others wait.
// CPU, measured by BenchmarkRestore's profile on 2 cores: about 1.7 µs a
// record restored from scratch: Badger's write goroutine 0.5 µs (shared by
// every partition: the bound), its memtable flush 0.3, Loader.Add 0.3,
// Decode 0.3, the fetch 0.15 (what a plain read costs), the Go collector
// the rest: 730,000-960,000 records/s for a bulk restore against 3.9-5.2M
// records/s for a consumer that does nothing. Plus a read per record in
// the incremental path.
//
// Why a client of its own and not the processor's group client: a franz-go
// client consumes either as a group member or by assigned partitions, not
// both; the group client is transactional and reads webhooks.raw, and its
// poll loop must keep running (heartbeats, other partitions) while one
// partition restores. A separate direct client also gets its own fetch
// sizes, KeepControlRecords (below) and a position nobody else moves.
package restore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/processor/internal/state"
)

// Defaults of Config.
const (
	DefaultBatchSize       = 5000
	DefaultSettleTimeout   = 60 * time.Second
	DefaultCheckpointBytes = 64 << 20
)

const (
	// fetchBytes bounds one fetch of the partition.
	fetchBytes = 8 << 20
	// fetchMaxWait is how long the broker holds a fetch with nothing to
	// return; restore only reads data that is there, so it matters only
	// when the end is reached by records it does not return.
	fetchMaxWait = 250 * time.Millisecond
	// stallAfter: with no record for this long while short of the end, the
	// rest of the range is checked with a raw fetch (see drained).
	stallAfter = time.Second
)

// DefaultProgressEvery is Config.ProgressEvery's default.
const DefaultProgressEvery = 10 * time.Second

// progressRecords is how many records a restore reads between two looks at
// the clock for its progress line.
const progressRecords = 4096

// Config configures Partition.
type Config struct {
	// Topic is the changelog topic, with its prefix.
	Topic string
	// NewClient builds a client with the service's connection options
	// (kafkaconf) followed by opts; Partition adds its consumer options
	// and closes the client when done.
	NewClient func(opts ...kgo.Opt) (*kgo.Client, error)
	// Decode turns a changelog value into what the store keeps for it
	// (decide.StoredFromChangelog: the stored form) and returns its expiry
	// (zero: none).
	Decode func(value []byte) (stored []byte, expiresAt time.Time, err error)
	// Now is the clock for expiry; default time.Now.
	Now func() time.Time
	// Logger gets a warning per skipped record and per rebuild, an info
	// line every ProgressEvery while a restore runs, and a debug line per
	// restore; default discards.
	Logger *slog.Logger
	// ProgressEvery is how often a restore still running logs how far it
	// is (a cold restore of a large partition takes minutes); default
	// DefaultProgressEvery.
	ProgressEvery time.Duration
	// BatchSize is the number of changes per Store.Apply (per Loader.Add
	// in bulk); default 5000.
	BatchSize int
	// CheckpointBytes is how much a bulk restore writes (keys and values)
	// between two checkpoints: what a crash in the middle of it costs to
	// read again. Each checkpoint waits for the writes in flight. Default
	// 64 MiB.
	CheckpointBytes int64
	// SettleTimeout bounds the wait for transactions open on the partition
	// when the restore starts to commit or abort; past it, Partition logs a
	// warning and reads only to the last stable offset. Default 60s.
	SettleTimeout time.Duration
}

// Stats describes one restore.
type Stats struct {
	Partition int32
	// From is the first offset read, To the checkpoint stored at the end
	// (the next offset to read).
	From, To int64
	// Records is the number of data records read (transaction markers are
	// not counted): Applied (written or deleted) + Expired (already expired:
	// only deleted the older value) + Skipped (undecodable or without key).
	Records, Applied, Expired, Skipped int
	Duration                           time.Duration
	// Rebuilt reports that the partition's state was wiped and read again
	// from the log start: the checkpoint was unreadable, ahead of the
	// partition's end (topic recreated or truncated), or below its log
	// start (retention deleted records never restored).
	Rebuilt bool
	// Bytes is the size of the data records read (keys and values).
	Bytes int64
	// Bulk reports that the partition was restored from scratch (no
	// checkpoint, or Rebuilt) with the bulk writer, state.Loader;
	// otherwise each batch was a Store.Apply.
	Bulk bool
}

// RecordsPerSecond is Records over Duration (0 when Duration is 0).
func (s Stats) RecordsPerSecond() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Records) / s.Duration.Seconds()
}

// MBPerSecond is Bytes (in MB, 10^6 bytes) over Duration.
func (s Stats) MBPerSecond() float64 {
	if s.Duration <= 0 {
		return 0
	}
	return float64(s.Bytes) / 1e6 / s.Duration.Seconds()
}

func (c Config) withDefaults() (Config, error) {
	switch {
	case c.Topic == "":
		return c, errors.New("restore: no changelog topic")
	case c.NewClient == nil:
		return c, errors.New("restore: no NewClient")
	case c.Decode == nil:
		return c, errors.New("restore: no Decode")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.SettleTimeout <= 0 {
		c.SettleTimeout = DefaultSettleTimeout
	}
	if c.CheckpointBytes <= 0 {
		c.CheckpointBytes = DefaultCheckpointBytes
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = DefaultProgressEvery
	}
	return c, nil
}

// consumerOpts are the options Partition adds to its client.
func consumerOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers come back as records, so a range that ends
		// with markers (the commit of the last batch, an abort) is seen
		// to end; they are not applied.
		kgo.KeepControlRecords(),
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(fetchBytes),
		kgo.FetchMaxWait(fetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

// restorer is the state of one Partition call.
type restorer struct {
	cfg   Config
	st    *state.Store
	cl    *kgo.Client
	adm   *kadm.Client
	p     int32
	log   *slog.Logger
	stats Stats
	batch []state.Change
}

// Partition restores partition of the store from the changelog, from the
// stored checkpoint (none: from the log start) to the partition's end: its
// high watermark when the call starts, once every transaction open on it
// then has committed or aborted (bounded by SettleTimeout). When it returns
// nil, the store holds every committed change below that end and the
// checkpoint points past it.
//
// Undecodable records are skipped with a warning, never fatal. If ctx ends
// (the partition was revoked), Partition returns ctx.Err() promptly; what it
// applied so far, each batch with its checkpoint, stays valid.
func Partition(ctx context.Context, cfg Config, st *state.Store, partition int32) (Stats, error) {
	begin := time.Now()
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Stats{Partition: partition}, err
	}
	cl, err := cfg.NewClient(consumerOpts()...)
	if err != nil {
		return Stats{Partition: partition}, fmt.Errorf("restore: client: %w", err)
	}
	defer cl.Close()
	r := &restorer{
		cfg: cfg, st: st, cl: cl, adm: kadm.NewClient(cl), p: partition,
		log:   cfg.Logger.With("topic", cfg.Topic, "partition", partition),
		stats: Stats{Partition: partition},
	}
	err = r.run(ctx)
	r.stats.Duration = time.Since(begin)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return r.stats, ctxErr
		}
		return r.stats, fmt.Errorf("restore %s[%d]: %w", cfg.Topic, partition, err)
	}
	r.log.Debug("restored", "from", r.stats.From, "to", r.stats.To, "records", r.stats.Records,
		"applied", r.stats.Applied, "expired", r.stats.Expired, "skipped", r.stats.Skipped,
		"rebuilt", r.stats.Rebuilt, "bulk", r.stats.Bulk, "duration", r.stats.Duration,
		"records_per_second", int64(r.stats.RecordsPerSecond()), "mb_per_second", fmt.Sprintf("%.1f", r.stats.MBPerSecond()))
	return r.stats, nil
}

func (r *restorer) run(ctx context.Context) error {
	logStart, err := r.listOffset(ctx, r.adm.ListStartOffsets)
	if err != nil {
		return fmt.Errorf("log start offset: %w", err)
	}
	hwm, err := r.listOffset(ctx, r.adm.ListEndOffsets)
	if err != nil {
		return fmt.Errorf("high watermark: %w", err)
	}
	end, err := r.settle(ctx, hwm)
	if err != nil {
		return err
	}
	// A checkpoint may lie past the hwm asked above (just past a commit
	// marker written since): it is ahead of the partition only past both.
	from, checkpointed, err := r.start(logStart, max(hwm, end))
	if err != nil {
		return err
	}
	r.stats.From, r.stats.To = from, from
	if from >= end {
		if !checkpointed {
			return r.flush(ctx, from)
		}
		return nil
	}
	// Without a checkpoint the partition was just wiped (or never held
	// anything): the bulk path needs no read before each write.
	r.stats.Bulk = !checkpointed
	r.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.Topic: {r.p: kgo.NewOffset().At(from)}})
	return r.consume(ctx, from, end, r.stats.Bulk)
}

// memory is what a restore of n offsets reserves from the store's restore
// budget (state.Store.Reserve) while it reads: the fetch being decoded and
// the one buffered, both batches (whose values point into fetched memory)
// and the bulk writes still committing; about 32 MiB, less for a short
// range (at about 512 bytes a record), so an incremental restore of a few
// records does not queue behind bulk ones.
func (r *restorer) memory(n int64) int64 {
	full := int64(2*fetchBytes) + int64(2*r.cfg.BatchSize)*512 + 10<<20
	return min(full, n*512+1<<20)
}

// listOffset returns the partition's offset from one of kadm's ListOffsets,
// retrying for a few seconds while the partition is unknown or its leader
// is moving (a topic just created, a broker restarting).
func (r *restorer) listOffset(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		offs, err := list(ctx, r.cfg.Topic)
		if err == nil {
			o, ok := offs.Lookup(r.cfg.Topic, r.p)
			if missing, gone := offs.Lookup(r.cfg.Topic, -1); !ok && gone {
				o, ok = missing, true // kadm's entry for a topic that does not exist
			}
			switch {
			case !ok:
				err = fmt.Errorf("partition %d of %s not found", r.p, r.cfg.Topic)
			case o.Err != nil:
				err = o.Err
			default:
				return o.Offset, nil
			}
			if ok && !kerr.IsRetriable(o.Err) {
				return 0, err
			}
		}
		if ctx.Err() != nil || attempt == 8 {
			return 0, err
		}
		if err := sleep(ctx, wait); err != nil {
			return 0, err
		}
		wait = min(2*wait, time.Second)
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// settle waits until the last stable offset reaches hwm: every transaction
// that wrote below hwm has committed or aborted, so reading to hwm misses
// none of them. It returns the end to read to: that last stable offset,
// which lies at or past hwm and so covers the commit or abort markers of
// those transactions (a marker may be written after hwm was asked), or,
// when SettleTimeout passes first, the last stable offset then (below hwm).
// Every offset below the end is decided; the restore reads exactly
// [from, end), and its progress lines and Stats.To name this same end.
func (r *restorer) settle(ctx context.Context, hwm int64) (int64, error) {
	deadline := time.Now().Add(r.cfg.SettleTimeout)
	wait := 20 * time.Millisecond
	for {
		lso, err := r.listOffset(ctx, r.adm.ListCommittedOffsets)
		if err != nil {
			return 0, fmt.Errorf("last stable offset: %w", err)
		}
		if lso >= hwm {
			return lso, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			r.log.Warn("restore: transactions on the changelog still open after the settle timeout; reading to the last stable offset",
				"offset", lso, "high_watermark", hwm, "settle_timeout", r.cfg.SettleTimeout)
			return lso, nil
		}
		if err := sleep(ctx, min(wait, left)); err != nil {
			return 0, err
		}
		wait = min(2*wait, time.Second)
	}
}

// start returns the offset to read from, wiping the partition when its
// checkpoint cannot be trusted; checkpointed is false when the store holds
// no checkpoint at that offset.
func (r *restorer) start(logStart, hwm int64) (from int64, checkpointed bool, err error) {
	cp, ok, err := r.st.Checkpoint(r.p)
	var why string
	switch {
	case errors.Is(err, state.ErrCorrupt):
		why = "the checkpoint is unreadable"
	case err != nil:
		return 0, false, err
	case !ok:
		// Nothing restored yet. Anything stored without a checkpoint (a
		// chunked Apply cut short) is re-read anyway; wipe it so no key of
		// an older incarnation of the topic survives. Cheap when empty.
		if err := r.st.WipePartition(r.p); err != nil {
			return 0, false, err
		}
		return logStart, false, nil
	case cp > hwm:
		why = "the checkpoint is ahead of the partition's end (topic recreated or truncated)"
	case cp < logStart:
		why = "the checkpoint is below the log start offset (retention deleted records not yet restored)"
	default:
		return cp, true, nil
	}
	r.log.Warn("restore: rebuilding the partition's state from the log start", "reason", why,
		"checkpoint", cp, "log_start_offset", logStart, "high_watermark", hwm, "err", err)
	if err := r.st.WipePartition(r.p); err != nil {
		return 0, false, err
	}
	r.stats.Rebuilt = true
	return logStart, false, nil
}

// consume reads [from, end) and applies it, batch by batch, in a writer
// goroutine. end is settle's: records a fetch brings from past it are left
// for the next restore, so a restore that returns nil checkpoints end
// itself, the end its progress lines named.
func (r *restorer) consume(ctx context.Context, from, end int64, bulk bool) (err error) {
	release, err := r.st.Reserve(ctx, r.memory(end-from))
	if err != nil {
		return err
	}
	defer release()
	w, batch := startWriter(r.st, r.p, bulk, min(r.cfg.BatchSize, int(min(end-from, 1<<20))), r.cfg.CheckpointBytes, r.log)
	r.batch = batch
	defer func() {
		to, ok, werr := w.close()
		if ok {
			r.stats.To = to
		}
		if err == nil {
			err = werr
		}
	}()
	pos := from // the next offset to read
	lastProgress := time.Now()
	started, lastLog := lastProgress, lastProgress
	logProgress := func() {
		if time.Since(lastLog) >= r.cfg.ProgressEvery {
			lastLog = time.Now()
			r.progress(from, pos, end, time.Since(started))
		}
	}
	for pos < end {
		logProgress()
		pctx, cancel := context.WithTimeout(ctx, stallAfter)
		fs := r.cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				errs = append(errs, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
			}
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		before := pos
		now := r.cfg.Now() // for expiry: once a fetch
		for it := fs.RecordIter(); !it.Done(); {
			rec := it.Next()
			if rec.Partition != r.p || rec.Offset < pos || rec.Offset >= end {
				continue // another partition, read before, or past the end settled on
			}
			pos = rec.Offset + 1
			if rec.Attrs.IsControl() {
				continue
			}
			r.add(rec, now)
			if r.stats.Records%progressRecords == 0 {
				logProgress() // one poll may bring a great many records
			}
			if len(r.batch) >= r.cfg.BatchSize {
				if r.batch, err = w.submit(ctx, r.batch, pos); err != nil {
					return err
				}
			}
		}
		switch {
		case pos > before:
			lastProgress = time.Now()
		case time.Since(lastProgress) >= stallAfter:
			// Nothing for a while, short of the end: the rest of the
			// range may hold only records the consumer drops without
			// a trace (aborted data whose marker lies past the last
			// stable offset, batches emptied by compaction).
			ok, err := r.drained(ctx, pos, end)
			if err != nil {
				r.log.Debug("restore: checking the rest of the range", "offset", pos, "err", err)
			}
			if ok {
				pos = end
			}
			lastProgress = time.Now()
		}
	}
	r.batch, err = w.submit(ctx, r.batch, pos)
	return err
}

// progress logs how far a restore of [from, end) is at pos after took:
// offsets left, the rate so far and, from it, the time left.
func (r *restorer) progress(from, pos, end int64, took time.Duration) {
	rate := float64(pos-from) / took.Seconds() // offsets a second
	left := "unknown"
	if rate > 0 {
		left = time.Duration(float64(end-pos) / rate * float64(time.Second)).Round(time.Second).String()
	}
	r.log.Info("restore in progress", "offset", pos, "end", end, "remaining", end-pos,
		"done_percent", int64(100*float64(pos-from)/float64(max(end-from, 1))),
		"records", r.stats.Records, "records_per_second", int64(float64(r.stats.Records)/took.Seconds()),
		"bulk", r.stats.Bulk, "time_left", left)
}

// add turns a changelog record into a change of the batch; now is the
// time expiries are compared with.
func (r *restorer) add(rec *kgo.Record, now time.Time) {
	r.stats.Records++
	r.stats.Bytes += int64(len(rec.Key) + len(rec.Value))
	if len(rec.Key) == 0 {
		r.stats.Skipped++
		r.log.Warn("restore: skipping a changelog record without key", "offset", rec.Offset)
		return
	}
	c := state.Change{Partition: r.p, Key: string(rec.Key)}
	if rec.Value != nil {
		stored, exp, err := r.cfg.Decode(rec.Value)
		if err != nil {
			r.stats.Skipped++
			r.log.Warn("restore: skipping an undecodable changelog record", "offset", rec.Offset, "key", c.Key, "err", err)
			return
		}
		if !exp.IsZero() && !exp.After(now) {
			r.stats.Expired++ // c stays a delete: an older value must not outlive it
			r.batch = append(r.batch, c)
			return
		}
		c.Value, c.ExpiresAt = stored, exp
	}
	r.stats.Applied++
	r.batch = append(r.batch, c)
}

// flush writes the checkpoint next alone, unless ctx has ended.
func (r *restorer) flush(ctx context.Context, next int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.st.Apply(nil, map[int32]int64{r.p: next}); err != nil {
		return err
	}
	r.stats.To = next
	return nil
}
