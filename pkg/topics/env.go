package topics

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/hookline/hookline/pkg/envconf"
)

// DefaultPartitions is the partition count of every topic unless
// HOOKLINE_PARTITIONS says otherwise.
const DefaultPartitions = 12

// DefaultMaxBodyBytes is the request body limit (HOOKLINE_MAX_BODY_BYTES).
const DefaultMaxBodyBytes = 1 << 20

// HeaderRoom is what a record may carry besides its body: hookline's headers
// and the provider's allowlisted ones (ingest caps the request's headers at
// less than this). Topics, producers and fetches are sized for body plus room.
const HeaderRoom = 256 << 10

// prefixRE is the characters Kafka allows in a topic name.
var prefixRE = regexp.MustCompile(`^[a-zA-Z0-9._-]*$`)

// MaxNameLen is the longest topic name Kafka accepts.
const MaxNameLen = 249

// CheckName says why name cannot be a Kafka topic's name, or returns nil:
// Kafka takes 1 to 249 letters, digits, '.', '_' and '-', except "." and
// "..". The error quotes name. Cost: one pass over name.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty: want a topic name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("%q is %d characters, over Kafka's %d", name, len(name), MaxNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a name Kafka allows", name)
	case !prefixRE.MatchString(name):
		return fmt.Errorf("%q: a topic name takes letters, digits, '.', '_' and '-' only", name)
	}
	return nil
}

// Env is the environment-wide topic settings every service reads.
type Env struct {
	Prefix       string // HOOKLINE_TOPIC_PREFIX
	Partitions   int32  // HOOKLINE_PARTITIONS
	Replication  int16  // HOOKLINE_REPLICATION_FACTOR (-1: broker default)
	MaxBodyBytes int    // HOOKLINE_MAX_BODY_BYTES
	// DLQRetention is HOOKLINE_DLQ_RETENTION: the DLQ topic's retention.ms
	// at creation, and how long the trace index keeps what it read.
	DLQRetention time.Duration
}

// DefaultDLQRetention is how long dead letters are kept unless
// HOOKLINE_DLQ_RETENTION says otherwise.
const DefaultDLQRetention = 30 * day

// ReadEnv reads the topic settings with r, which collects every problem.
func ReadEnv(r *envconf.Reader) Env {
	return Env{
		Prefix: envconf.Parse(r, "HOOKLINE_TOPIC_PREFIX", "", "letters, digits, '.', '_' and '-' only: they are allowed in topic names", func(v string) (string, error) {
			if !prefixRE.MatchString(v) {
				return "", new(envconf.Error)
			}
			return v, nil
		}),
		Partitions: int32(r.Int("HOOKLINE_PARTITIONS", DefaultPartitions, 1, 10000)),
		Replication: envconf.Parse(r, "HOOKLINE_REPLICATION_FACTOR", int16(-1), "a whole number from 1, or -1 for the broker's default", func(v string) (int16, error) {
			n, err := strconv.ParseInt(v, 10, 16)
			if err != nil || (n < 1 && n != -1) {
				return 0, new(envconf.Error)
			}
			return int16(n), nil
		}),
		MaxBodyBytes: r.Int("HOOKLINE_MAX_BODY_BYTES", DefaultMaxBodyBytes, 1, 64<<20),
		DLQRetention: r.Duration("HOOKLINE_DLQ_RETENTION", DefaultDLQRetention, time.Hour, 0),
	}
}

// MaxRecordBytes is the largest record hookline produces: the body limit
// plus HeaderRoom. Producers' batch size and topics' max.message.bytes use it.
func (e Env) MaxRecordBytes() int { return e.MaxBodyBytes + HeaderRoom }
