package backfill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hookline/hookline/pkg/providers"
)

// Job states.
const (
	StateRunning     = "running"
	StateDone        = "done"
	StateFailed      = "failed"
	StateInterrupted = "interrupted"
)

// Job is one backfill started through Jobs (dlq serve's POST /backfills).
type Job struct {
	ID        string    `json:"id"`
	Provider  string    `json:"provider"`
	Route     string    `json:"route"`
	By        string    `json:"by"`
	StartedAt time.Time `json:"started_at"`
	// State is running, done, failed (Error says why) or interrupted
	// (dlq serve stopped: start it again with the same id).
	State    string     `json:"state"`
	Progress Progress   `json:"progress"`
	Report   *Report    `json:"report,omitempty"`
	Error    string     `json:"error,omitempty"`
	EndedAt  *time.Time `json:"ended_at,omitempty"`
}

// ErrBusy: a backfill of the same route, or with the same id, is running.
var ErrBusy = errors.New("backfill: already running")

// Jobs runs backfills in the background and remembers them while the
// process lives (the records they sent, and their ids, are in Kafka; a job
// list is not).
type Jobs struct {
	run *Runner
	// stop is closed by Stop: running jobs are interrupted; running
	// counts them, so Stop returns once they ended.
	stop     chan struct{}
	stopOnce sync.Once
	running  sync.WaitGroup
	mu       sync.Mutex
	jobs     map[string]*Job
	// keep bounds the finished jobs remembered (oldest forgotten first).
	keep int
}

// NewJobs returns Jobs running with rn until Stop.
func NewJobs(rn *Runner) *Jobs {
	return &Jobs{run: rn, stop: make(chan struct{}), jobs: map[string]*Job{}, keep: 100}
}

// Stop interrupts the running jobs and returns once they ended (their
// state is then interrupted: start them again with the same id). A job
// started after Stop is interrupted at once.
func (j *Jobs) Stop() {
	j.stopOnce.Do(func() { close(j.stop) })
	j.running.Wait()
}

// context is a job's: it ends when Stop is called or the job returns
// (release).
func (j *Jobs) context() (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-j.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// DryRun runs spec as a dry run and returns its report.
func (j *Jobs) DryRun(ctx context.Context, spec Spec) (Report, error) {
	spec.DryRun = true
	return j.run.Run(ctx, spec, nil)
}

// Start starts spec in the background and returns the job as it starts.
// It refuses (ErrBusy) while a job of the same route or id is running.
func (j *Jobs) Start(spec Spec, by string) (Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range j.jobs {
		if o.State == StateRunning && (o.ID == spec.ID || (o.Provider == spec.Provider.Name && o.Route == spec.Route.Name)) {
			return Job{}, fmt.Errorf("%w: backfill %s of %s/%s", ErrBusy, o.ID, o.Provider, o.Route)
		}
	}
	job := &Job{ID: spec.ID, Provider: spec.Provider.Name, Route: spec.Route.Name, By: by, StartedAt: time.Now().UTC(), State: StateRunning}
	j.jobs[spec.ID] = job
	j.forget()
	j.running.Add(1)
	go func() {
		defer j.running.Done()
		ctx, release := j.context()
		defer release()
		rep, err := j.run.Run(ctx, spec, func(p Progress) {
			j.mu.Lock()
			job.Progress = p
			j.mu.Unlock()
		})
		j.mu.Lock()
		defer j.mu.Unlock()
		now := time.Now().UTC()
		job.EndedAt, job.Report = &now, &rep
		switch {
		case err != nil:
			job.State, job.Error = StateFailed, err.Error()
		case rep.Interrupted:
			job.State = StateInterrupted
		case rep.Failed > 0 || len(rep.Incomplete) > 0:
			job.State, job.Error = StateFailed, fmt.Sprintf("%d records refused, partitions not read to the end: %v; start it again with the same id", rep.Failed, rep.Incomplete)
		default:
			job.State = StateDone
		}
	}()
	return *job, nil
}

// forget drops the oldest finished jobs beyond keep. Callers hold mu.
func (j *Jobs) forget() {
	var ended []*Job
	for _, o := range j.jobs {
		if o.State != StateRunning {
			ended = append(ended, o)
		}
	}
	if len(ended) <= j.keep {
		return
	}
	slices.SortFunc(ended, func(a, b *Job) int { return a.StartedAt.Compare(b.StartedAt) })
	for _, o := range ended[:len(ended)-j.keep] {
		delete(j.jobs, o.ID)
	}
}

// Get returns the job id.
func (j *Jobs) Get(id string) (Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	o, ok := j.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *o, true
}

// List returns the jobs, newest first.
func (j *Jobs) List() []Job {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Job, 0, len(j.jobs))
	for _, o := range j.jobs {
		out = append(out, *o)
	}
	slices.SortFunc(out, func(a, b Job) int { return b.StartedAt.Compare(a.StartedAt) })
	return out
}

// Resolve finds PROVIDER/ROUTE in reg: the error says which is unknown and
// what is known.
func Resolve(reg *providers.Registry, provider, route string) (*providers.Provider, *providers.Route, error) {
	p, ok := reg.Get(provider)
	if !ok {
		return nil, nil, fmt.Errorf("provider %q is not in the providers file", provider)
	}
	rt, ok := p.Route(route)
	if !ok {
		var names []string
		for _, r := range p.Routes() {
			names = append(names, r.Name)
		}
		if len(names) == 0 {
			return nil, nil, fmt.Errorf("provider %s delivers nowhere: it has no route to backfill", provider)
		}
		return nil, nil, fmt.Errorf("provider %s has no route %q; its routes: %v", provider, route, names)
	}
	return p, rt, nil
}
