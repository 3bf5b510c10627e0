package topics

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
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

var prefixRE = regexp.MustCompile(`^[a-zA-Z0-9._-]*$`)

// Env is the environment-wide topic settings every service reads.
type Env struct {
	Prefix       string // HOOKLINE_TOPIC_PREFIX
	Partitions   int32  // HOOKLINE_PARTITIONS
	Replication  int16  // HOOKLINE_REPLICATION_FACTOR (-1: broker default)
	MaxBodyBytes int    // HOOKLINE_MAX_BODY_BYTES
}

// EnvFrom reads the topic settings; lookupEnv is os.LookupEnv in production.
func EnvFrom(lookupEnv func(string) (string, bool)) (Env, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	e := Env{Prefix: get("HOOKLINE_TOPIC_PREFIX"), Partitions: DefaultPartitions, Replication: -1, MaxBodyBytes: DefaultMaxBodyBytes}
	if !prefixRE.MatchString(e.Prefix) {
		return Env{}, fmt.Errorf("HOOKLINE_TOPIC_PREFIX=%q: only letters, digits, '.', '_' and '-' are allowed in topic names", e.Prefix)
	}
	if v := get("HOOKLINE_PARTITIONS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 1 || n > 10000 {
			return Env{}, fmt.Errorf("HOOKLINE_PARTITIONS=%q: want a whole number from 1 to 10000", v)
		}
		e.Partitions = int32(n)
	}
	if v := get("HOOKLINE_REPLICATION_FACTOR"); v != "" {
		n, err := strconv.ParseInt(v, 10, 16)
		if err != nil || (n < 1 && n != -1) {
			return Env{}, fmt.Errorf("HOOKLINE_REPLICATION_FACTOR=%q: want a whole number from 1, or -1 for the broker's default", v)
		}
		e.Replication = int16(n)
	}
	if v := get("HOOKLINE_MAX_BODY_BYTES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64<<20 {
			return Env{}, fmt.Errorf("HOOKLINE_MAX_BODY_BYTES=%q: want a whole number of bytes from 1 to 67108864", v)
		}
		e.MaxBodyBytes = n
	}
	return e, nil
}

// MaxRecordBytes is the largest record hookline produces: the body limit
// plus HeaderRoom. Producers' batch size and topics' max.message.bytes use it.
func (e Env) MaxRecordBytes() int { return e.MaxBodyBytes + HeaderRoom }
