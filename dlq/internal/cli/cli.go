// Package cli is the dlq command (DESIGN §8): list, show, replay, stats,
// resolve, trace, events, parked, status, health-report, backfill, provider, route and serve, each a function over
// parsed flags, printing tables for people or, with --json, one JSON object
// per line for programs.
//
// Exit codes: 0 ok, 1 failure (Kafka, a replay that was not sent), 2 usage
// (a bad flag or ref, or a ref that does not exist). Run returns an error
// and ExitCode maps it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/dlq/internal/store"
	"github.com/hookline/hookline/dlq/internal/trace"
	"github.com/hookline/hookline/pkg/topics"
)

// Env is what a run of the command sees of the world.
type Env struct {
	// Args are the arguments after the program name.
	Args []string
	// Lookup reads an environment variable (os.LookupEnv in production).
	Lookup func(string) (string, bool)
	// Stdin is read by dlq rules test --body - (nil: none).
	Stdin io.Reader
	// Stdout carries results; Stderr progress, warnings and logs.
	Stdout, Stderr io.Writer
	// StderrTTY says Stderr is a terminal: replay progress is then shown
	// without --progress.
	StderrTTY bool
	// Ready, when set, receives the address `dlq serve` listens on.
	Ready chan<- string
}

// Help is the text of `dlq help`.
const Help = `dlq — look at, replay and resolve hookline's dead letters (webhooks.dlq);
pause, resume and drain a provider's or a route's deliveries (webhooks.control)

Usage:
  dlq list    [--provider P] [--route R] [--reason R] [--key K] [--since DUR|TIME] [--unresolved] [--limit N] [--json]
  dlq show    <partition>:<offset> [--json | --body]
  dlq replay  (<partition>:<offset>... | --key K | --provider P | --all)
              [--route R] [--reason R] [--since DUR|TIME] [--include-resolved]
              [--dry-run] [--rate N/s] [--wait DUR] [--by NAME] [--note TEXT] [--progress] [--json]
  dlq stats   [--provider P] [--route R] [--json]
  dlq trace   KEY [--json]
  dlq events  [--provider P] [--route R] [--event TYPE] [--status S] [--since DUR|TIME] [--until DUR|TIME]
              [--limit N] [--cursor C] [--json]
  dlq parked  [--tier T] [--provider P] [--route R] [--limit N] [--offset N] [--json]
  dlq status  [--window DUR] [--json]
  dlq health-report [--email ADDR,...] [--window DUR] [--print]
  dlq backfill PROVIDER/ROUTE --since DUR|TIME [--until DUR|TIME] [--events GLOB,...]
              [--again] [--id ID] [--rate N/s] [--dry-run] [--progress] [--json]
  dlq rules test PROVIDER --body FILE [--header 'K: V']... [--event TYPE] [--json]
  dlq rules test [PROVIDER] (--from-dlq REF | --from-raw PARTITION:OFFSET) [--json]
  dlq resolve <partition>:<offset>... --resolution ignored|manual_fix --note TEXT [--by NAME] [--json]
  dlq provider pause|resume NAME [--by NAME] [--json]
  dlq provider rate NAME --rate N/s [--by NAME] [--json]
  dlq provider list [--json]
  dlq route pause|resume PROVIDER/ROUTE [--by NAME] [--json]
  dlq route rate PROVIDER/ROUTE --rate N/s [--by NAME] [--json]
  dlq route list [--json]
  dlq serve   [--addr HOST:PORT]
  dlq help    [command]

An entry is named by its ref, <partition>:<offset> in webhooks.dlq (list
shows it). Every read scans the topics from their start to where they end
when the command starts, read_committed; nothing waits for new records.

list     entries newest first, with their route and resolution; filters
         combine. An entry's route is its hookline.route header, default
         when it has none (every entry written before routes); --route R
         takes route R of every provider, or of --provider P.
show     one entry: headers, error history, body (pretty-printed when JSON);
         --body writes the exact body bytes and nothing else.
replay   re-produces to webhooks.raw with hookline.origin=replay,
         hookline.attempt=1, hookline.replay-id=dlq:<partition>:<offset>, the
         exact key and body and the other headers (not dead-reason, due-at,
         source.*), then marks the entry replayed on webhooks.dlq-status.
         Running the same replay twice processes nothing twice: the
         processor keeps each key's replay ids. A replay keeps the
         entry's hookline.route, so it is delivered to that route only.
         Named refs are sent whatever their resolution; --key, --provider
         and --all take unresolved entries only, unless --include-resolved
         (--route narrows them). --rate bounds records per second (50,
         50/s, 600/m); --wait waits that long for the processor's outcomes
         and prints them; --dry-run sends nothing.
         Progress goes to stderr when it is a terminal, or with --progress.
stats    counts by provider, by provider/route, by reason and by resolution;
         the oldest entries (--provider and --route narrow them).
trace    a key's whole path in time order and where it stands now (dlq help trace).
events   recent deliveries newest first, one row per outcome, found by
         provider, route, event type, status and time, with each key's
         trace id (dlq help events).
parked   what waits in the retry tiers and the destinations' lanes (dlq help parked).
status   is it healthy? per provider and route: accepted, done, retrying,
         parked, dead letters, breaker, setting; webhooks.raw's lag and
         oldest unprocessed record; a verdict with reasons (dlq help status).
health-report
         sends what status prints by e-mail, through the SMTP settings make
         observe uses; serve sends it periodically when
         HOOKLINE_HEALTH_REPORT_TO is set (dlq help health-report).
backfill delivers again, to one route only, the events webhooks.raw holds
         from a time range: by default where the route has no state for
         the key (a route added since), with --again also where it is done,
         once per backfill id (dlq help backfill).
rules    tries a provider's routes on one delivery before they go live:
         per route, whether it matches and which part of its rule (events,
         where, filter and its operator) decided (dlq help rules).
resolve  records that an entry needs no replay: ignored or manual_fix, with
         a note and who (--by, default $USER).
provider pauses a provider's deliveries, every route of it (they wait,
         parked in the lane topics), resumes them, or drains them at a
         rate; lists the settings (webhooks.control; see dlq help provider).
route    the same for one route of a provider, PROVIDER/ROUTE (dlq help route).
serve    the admin API and the console page (see dlq help serve).

--json prints one JSON object per line on stdout. --since takes a duration
back from now (90m, 36h, 7d) or a time (2026-03-01, 2026-03-01T12:00:00Z).

Exit codes: 0 ok; 1 failure; 2 usage: a bad flag or ref, or a ref that does
not exist.

Environment: KAFKA_BROKERS (default 127.0.0.1:9092), KAFKA_TLS,
KAFKA_TLS_CA_FILE, KAFKA_SASL_MECHANISM, KAFKA_SASL_USER, KAFKA_SASL_PASSWORD,
HOOKLINE_TOPIC_PREFIX, HOOKLINE_MAX_BODY_BYTES; for provider, route, rules and serve
HOOKLINE_PROVIDERS (the providers and routes a setting may name, and the redrive
policies serve applies); for serve HOOKLINE_ADMIN_ADDR (default
127.0.0.1:8081) and HOOKLINE_ADMIN_TOKEN (trace and events ask the serve
there when it holds the index); for trace, events and serve
HOOKLINE_TRACE_DIR (the trace index, default data/dlq-trace); USER.
`

// usageError is a mistake in the command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{msg: fmt.Sprintf(format, a...)} }

// errFailed is returned after a command already said what failed.
var errFailed = errors.New("failed")

// ExitCode maps Run's error to the process exit code: 0, 1 or 2.
func ExitCode(err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue), errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrBadRef), errors.Is(err, trace.ErrUnknownKey):
		return 2
	}
	return 1
}

// Message is what main prints for err ("" for none): usage errors end with
// a pointer to the help.
func Message(err error) string {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp), errors.Is(err, errFailed):
		return ""
	case ExitCode(err) == 2:
		return "dlq: " + err.Error() + "\n(dlq help shows the usage)"
	}
	return "dlq: " + err.Error()
}

// Run runs one dlq command. An error that Kafka's refusal of these
// settings caused (a wrong password or CA, TLS missing) says so
// (kafkaconf.Explain).
func Run(ctx context.Context, env Env) error {
	err := runCommand(ctx, env)
	if cfg, cerr := loadConfig(env.Lookup); err != nil && cerr == nil {
		err = cfg.Kafka.Explain(err)
	}
	return err
}

func runCommand(ctx context.Context, env Env) error {
	if len(env.Args) == 0 {
		fmt.Fprint(env.Stderr, Help)
		return usagef("no command")
	}
	cmd, args := env.Args[0], env.Args[1:]
	switch cmd {
	case "help", "-h", "--help", "-help":
		if len(args) > 0 {
			if h, ok := commandHelp[args[0]]; ok {
				fmt.Fprint(env.Stdout, h)
				return nil
			}
		}
		fmt.Fprint(env.Stdout, Help)
		return nil
	case "list":
		return runList(ctx, env, args)
	case "show":
		return runShow(ctx, env, args)
	case "replay":
		return runReplay(ctx, env, args)
	case "stats":
		return runStats(ctx, env, args)
	case "resolve":
		return runResolve(ctx, env, args)
	case "provider":
		return runProvider(ctx, env, args)
	case "route":
		return runRoute(ctx, env, args)
	case "serve":
		return runServe(ctx, env, args)
	case "events":
		return runEvents(ctx, env, args)
	case "trace":
		return runTrace(ctx, env, args)
	case "parked":
		return runParked(ctx, env, args)
	case "status":
		return runStatus(ctx, env, args)
	case "backfill":
		return runBackfill(ctx, env, args)
	case "health-report":
		return runHealthReport(ctx, env, args)
	case "rules":
		return runRules(ctx, env, args)
	}
	return usagef("unknown command %q: want list, show, replay, stats, resolve, trace, events, parked, status, health-report, backfill, rules, provider, route, serve or help", cmd)
}

// commandHelp is the usage of each command, for `dlq <command> -h`.
var commandHelp = map[string]string{
	"list":     "usage: dlq list [--provider P] [--route R] [--reason R] [--key K] [--since DUR|TIME] [--unresolved] [--limit N] [--json]\n",
	"show":     "usage: dlq show <partition>:<offset> [--json | --body]\n",
	"replay":   "usage: dlq replay (<partition>:<offset>... | --key K | --provider P | --all) [--route R] [--reason R] [--since DUR|TIME] [--include-resolved] [--dry-run] [--rate N/s] [--wait DUR] [--by NAME] [--note TEXT] [--progress] [--json]\n",
	"stats":    "usage: dlq stats [--provider P] [--route R] [--json]\n",
	"resolve":  "usage: dlq resolve <partition>:<offset>... --resolution ignored|manual_fix --note TEXT [--by NAME] [--json]\n",
	"provider": providerHelp,
	"route":    routeHelp,
	"serve":    serveHelp,
	"trace":    traceHelp,
	"events":   eventsHelp,
	"parked":   parkedHelp,
	"status":   statusHelp,
	"backfill": backfillHelp,
	"rules":    rulesHelp,

	"health-report": reportHelp,
}

// app is a connected command: one client for admin requests and writes,
// and a store over it. Scans make their own consumers.
type app struct {
	cfg       config
	env       Env
	newClient func(extra ...kgo.Opt) (*kgo.Client, error)
	cl        *kgo.Client
	adm       *kadm.Client
	store     *store.Store
	names     topics.Names
	// statusOK: webhooks.dlq-status was checked (ensureStatusTopic).
	statusOK atomic.Bool
}

// kafkaTimeout bounds the requests that find the topics' bounds and shape.
const kafkaTimeout = 30 * time.Second

func connect(env Env) (*app, error) {
	cfg, err := loadConfig(env.Lookup)
	if err != nil {
		return nil, usagef("%v", err)
	}
	conn, err := cfg.Kafka.Opts(kgo.ClientID("hookline-dlq"))
	if err != nil {
		return nil, err
	}
	newClient := func(extra ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append(append([]kgo.Opt(nil), conn...), extra...)...)
	}
	cl, err := newClient(
		kgo.RecordPartitioner(topics.Partitioner()), // a replay to its entity's (or key's) partition
		kgo.RequiredAcks(kgo.AllISRAcks()),          // idempotent by default in franz-go
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(cfg.Topics.MaxRecordBytes())),
		kgo.RecordDeliveryTimeout(kafkaTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	a := &app{cfg: cfg, env: env, newClient: newClient, cl: cl, adm: kadm.NewClient(cl), names: topics.NewNames(cfg.Topics.Prefix, nil)}
	a.store = store.New(store.Config{
		Names:     a.names,
		NewClient: newClient,
		Client:    cl,
		Warn:      func(msg string) { fmt.Fprintln(env.Stderr, "dlq: warning:", msg) },
	})
	return a, nil
}

func (a *app) close() { a.cl.Close() }

// kafkaErr explains a missing DLQ topic; other errors pass.
func (a *app) kafkaErr(err error) error {
	if errors.Is(err, store.ErrNoTopic) {
		return fmt.Errorf("%w (KAFKA_BROKERS=%s HOOKLINE_TOPIC_PREFIX=%q: is the prefix right, and has a hookline service run once to create the topics?)",
			err, strings.Join(a.cfg.Kafka.Brokers, ","), a.cfg.Topics.Prefix)
	}
	return err
}

// checkTopic fails unless topic exists.
func (a *app) checkTopic(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, kafkaTimeout)
	defer cancel()
	d, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if t, ok := d[topic]; !ok || t.Err != nil {
		return a.kafkaErr(fmt.Errorf("%s: %w", topic, store.ErrNoTopic))
	}
	return nil
}

// parseRefs parses positional refs; a bad one is a usage error.
func parseRefs(args []string) ([]store.Ref, error) {
	out := make([]store.Ref, 0, len(args))
	for _, a := range args {
		r, err := store.ParseRef(a)
		if err != nil {
			return nil, usagef("%v", err)
		}
		out = append(out, r)
	}
	return out, nil
}
