// Package envconftest checks a service's configuration in its tests: that
// every variable it reads, given a bad value, is named by its own message,
// and that all of them are reported at once (Check); and that the
// configuration table (docs/operating.md) lists the variables the service
// reads, for the services that read them (Readme).
package envconftest

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Load is a service's loadConfig.
type Load[C any] func(lookup func(string) (string, bool)) (C, error)

// Env returns a lookup function over m, for a loader under test.
func Env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// Bad is a variable given a wrong value and what the error must say of it.
type Bad struct {
	Name, Value string
	Says        string // a part of the message, from the variable's name on
}

// Shared are bad values of the settings every service reads (pkg/kafkaconf,
// pkg/topics, HOOKLINE_LOG_LEVEL).
var Shared = []Bad{
	{"KAFKA_BROKERS", "a:1,kafka", `KAFKA_BROKERS="a:1,kafka": "kafka" has no port (want host:port addresses, comma-separated)`},
	{"KAFKA_TLS", "maybe", `KAFKA_TLS="maybe": want true or false`},
	{"KAFKA_TLS_INSECURE", "sure", `KAFKA_TLS_INSECURE="sure": want true or false`},
	{"KAFKA_SASL_MECHANISM", "MD5", `KAFKA_SASL_MECHANISM="MD5": want PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`},
	{"HOOKLINE_TOPIC_PREFIX", "a b", `HOOKLINE_TOPIC_PREFIX="a b": want letters, digits, '.', '_' and '-' only`},
	{"HOOKLINE_PARTITIONS", "0", `HOOKLINE_PARTITIONS="0": want a whole number from 1 to 10000`},
	{"HOOKLINE_REPLICATION_FACTOR", "0", `HOOKLINE_REPLICATION_FACTOR="0": want a whole number from 1, or -1 for the broker's default`},
	{"HOOKLINE_MAX_BODY_BYTES", "-1", `HOOKLINE_MAX_BODY_BYTES="-1": want a whole number from 1 to 67108864`},
	{"HOOKLINE_DLQ_RETENTION", "30m", `HOOKLINE_DLQ_RETENTION="30m": want a duration of 1h or more, such as 720h`},
	{"HOOKLINE_LOG_LEVEL", "loud", `HOOKLINE_LOG_LEVEL="loud": want debug, info, warn or error`},
}

// SharedCombined are the shared variables that no value alone makes wrong,
// only a combination (a SASL user without a mechanism, a CA file without
// TLS): pkg/kafkaconf's tests cover those.
var SharedCombined = []string{"KAFKA_TLS_CA_FILE", "KAFKA_SASL_USER", "KAFKA_SASL_PASSWORD"}

// Tracing are bad values of the OTEL_* variables pkg/tracing reads
// (ingest, processor, retrier); TracingAny are those that take any value.
var Tracing = []Bad{
	{"OTEL_SDK_DISABLED", "maybe", `OTEL_SDK_DISABLED="maybe": want true or false`},
	{"OTEL_TRACES_EXPORTER", "zipkin", `OTEL_TRACES_EXPORTER="zipkin": want otlp or none (hookline exports traces by OTLP only)`},
	{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318", `OTEL_EXPORTER_OTLP_ENDPOINT="collector:4318": want an http(s) URL, such as http://collector:4318`},
	{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector", `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="collector": want an http(s) URL, such as http://collector:4318`},
	{"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", `OTEL_EXPORTER_OTLP_PROTOCOL="http/json": want http/protobuf or grpc`},
	{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "thrift", `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="thrift": want http/protobuf or grpc`},
	{"OTEL_TRACES_SAMPLER", "sometimes", `OTEL_TRACES_SAMPLER="sometimes": want always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio`},
	{"OTEL_TRACES_SAMPLER_ARG", "2", `OTEL_TRACES_SAMPLER_ARG="2": want a ratio from 0 to 1, such as 0.01`},
}

// TracingAny are the OTEL_* variables pkg/tracing reads that no value
// makes wrong.
var TracingAny = []string{"OTEL_SERVICE_NAME"}

// Retry are bad values of HOOKLINE_RETRY_TIERS and HOOKLINE_RETRY_JITTER.
var Retry = []Bad{
	{"HOOKLINE_RETRY_TIERS", "5m,1m", `HOOKLINE_RETRY_TIERS="5m,1m": tier 2 (1m) is not longer than tier 1 (5m)`},
	{"HOOKLINE_RETRY_JITTER", "2", `HOOKLINE_RETRY_JITTER="2": want a fraction from 0 to 1, such as 0.2`},
}

// Providers is HOOKLINE_PROVIDERS left empty, where it is required
// (startup.ReadProvidersFile).
var Providers = Bad{"HOOKLINE_PROVIDERS", " ", `HOOKLINE_PROVIDERS is not set: want the providers file's path (or --providers)`}

// EventTypeLabels is a bad HOOKLINE_EVENT_TYPE_LABELS, read by ingest and
// the processor (typelabel.ReadEnv).
var EventTypeLabels = Bad{"HOOKLINE_EVENT_TYPE_LABELS", "-1", `HOOKLINE_EVENT_TYPE_LABELS="-1": want a whole number from 0 to 10000`}

// TimerSlack is a bad HOOKLINE_TIMER_SLACK, read by ingest, the processor
// and dlq (timerslack.ReadEnv).
var TimerSlack = Bad{"HOOKLINE_TIMER_SLACK", "1s", `HOOKLINE_TIMER_SLACK="1s": want a duration from 0s to 100ms`}

// Common returns Shared, Retry and own: the bad values of a service that
// reads startup.Common and own variables.
func Common(own ...Bad) []Bad {
	return slices.Concat(Shared, Retry, own)
}

// Check runs load with base plus each bad value alone, and wants its
// message and no other; then with every bad value at once, and wants every
// message, each once, counted in the first line. Every variable load reads
// must be in bad or in anyValue (the variables no value alone makes wrong),
// so a variable added without a case here fails the test.
func Check[C any](t *testing.T, load Load[C], base map[string]string, bad []Bad, anyValue ...string) {
	t.Helper()
	env := func(extra map[string]string) func(string) (string, bool) {
		m := map[string]string{}
		maps.Copy(m, base)
		maps.Copy(m, extra)
		return Env(m)
	}
	if _, err := load(env(nil)); err != nil {
		t.Fatalf("the base environment is refused: %v", err)
	}
	covered := slices.Clone(anyValue)
	all := map[string]string{}
	for _, b := range bad {
		covered = append(covered, b.Name)
		all[b.Name] = b.Value
		_, err := load(env(map[string]string{b.Name: b.Value}))
		switch {
		case err == nil:
			t.Errorf("%s=%q is accepted", b.Name, b.Value)
		case !strings.Contains(err.Error(), b.Says):
			t.Errorf("%s=%q: error %q does not say %q", b.Name, b.Value, err, b.Says)
		case strings.Contains(err.Error(), "\n"):
			t.Errorf("%s=%q alone: error names more than it:\n%s", b.Name, b.Value, err)
		}
	}
	_, err := load(env(all))
	if err == nil {
		t.Fatal("every bad value at once is accepted")
	}
	msg := err.Error()
	if want := fmt.Sprintf("%d settings are wrong:\n", len(bad)); !strings.HasPrefix(msg, want) {
		t.Errorf("every bad value at once: error does not start %q:\n%s", want, msg)
	}
	for _, b := range bad {
		if n := strings.Count(msg, "\n  "+b.Says); n != 1 {
			t.Errorf("every bad value at once: %q said %d times in:\n%s", b.Says, n, msg)
		}
	}
	for _, name := range Reads(load, base) {
		if !slices.Contains(covered, name) {
			t.Errorf("%s is read but has no bad value in this test (nor is it listed as taking any value)", name)
		}
	}
}

// Reads returns the variables load looks up, sorted, with base set.
func Reads[C any](load Load[C], base map[string]string) []string {
	seen := map[string]bool{}
	_, _ = load(func(k string) (string, bool) {
		seen[k] = true
		v, ok := base[k]
		return v, ok
	})
	return slices.Sorted(maps.Keys(seen))
}

// Row is one row of the configuration table (docs/operating.md).
type Row struct {
	Vars     []string // the variables named in its first column
	Services []string // "all", or the services of its second column ("dlq serve" is "dlq")
	// Defaults are the values in backquotes in its third column: one per
	// variable, one per service, or one for all.
	Defaults []string
	Text     string // the whole row, to look up a variable mentioned in its meaning
}

// Default returns the default the row gives variable v for service, or
// false when the row gives none in backquotes ("empty", "none", "broker
// default") or gives them in a way this cannot pair.
func (r Row) Default(v, service string) (string, bool) {
	switch {
	case len(r.Defaults) == 1 && len(r.Vars) == 1:
		return r.Defaults[0], true
	case len(r.Vars) > 1 && len(r.Defaults) == len(r.Vars):
		return r.Defaults[slices.Index(r.Vars, v)], true
	case len(r.Vars) == 1 && len(r.Defaults) == len(r.Services) && slices.Contains(r.Services, service):
		return r.Defaults[slices.Index(r.Services, service)], true
	}
	return "", false
}

var (
	varRE     = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	quotedRE  = regexp.MustCompile("`([^`]*)`")
	serviceRE = regexp.MustCompile(`^(all|ingest|processor|retrier|dlq)\b`)
)

// Table reads the configuration table of the page at path: the first
// table after the "## Configuration" heading.
func Table(tb testing.TB, path string) []Row {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n## Configuration\n")
	if !ok {
		tb.Fatalf("%s has no \"## Configuration\" section", path)
	}
	var rows []Row
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if len(rows) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		r := Row{Text: line}
		for _, m := range varRE.FindAllStringSubmatch(cells[1], -1) {
			r.Vars = append(r.Vars, m[1])
		}
		for _, s := range strings.FieldsFunc(cells[2], func(c rune) bool { return c == ',' || c == ';' }) {
			if m := serviceRE.FindString(strings.TrimSpace(s)); m != "" && !slices.Contains(r.Services, m) {
				r.Services = append(r.Services, m)
			}
		}
		for _, m := range quotedRE.FindAllStringSubmatch(cells[3], -1) {
			r.Defaults = append(r.Defaults, m[1])
		}
		if len(r.Vars) > 0 { // the header and the rule have none
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		tb.Fatalf("%s: no configuration table", path)
	}
	return rows
}

// Readme checks the configuration table at path against service's load: each
// variable of a row naming the service (or "all") is read by load, and
// setting it to the default the row gives loads the same configuration as
// leaving it unset; and each variable load reads is in a row naming the
// service, or mentioned in such a row (a removed variable the table says
// is gone).
func Readme[C any](t *testing.T, path, service string, load Load[C], base map[string]string) {
	t.Helper()
	reads := Reads(load, base)
	unset, err := load(Env(base))
	if err != nil {
		t.Fatalf("the base environment is refused: %v", err)
	}
	var mine []Row
	for _, r := range Table(t, path) {
		if slices.Contains(r.Services, "all") || slices.Contains(r.Services, service) {
			mine = append(mine, r)
			for _, v := range r.Vars {
				if !slices.Contains(reads, v) {
					t.Errorf("the configuration table says %s reads %s; it does not", service, v)
					continue
				}
				def, ok := r.Default(v, service)
				if !ok {
					continue
				}
				m := map[string]string{}
				maps.Copy(m, base)
				m[v] = def
				switch got, err := load(Env(m)); {
				case err != nil:
					t.Errorf("the configuration table's default of %s for %s, %q, is refused: %v", v, service, def, err)
				case !reflect.DeepEqual(got, unset):
					t.Errorf("the configuration table's default of %s for %s, %q, is not what %s uses when it is unset:\n set:   %+v\n unset: %+v", v, service, def, service, got, unset)
				}
			}
		}
	}
	for _, v := range reads {
		found := false
		for _, r := range mine {
			if slices.Contains(r.Vars, v) || strings.Contains(r.Text, "`"+v+"`") {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s reads %s, which the configuration table does not list for it", service, v)
		}
	}
}
