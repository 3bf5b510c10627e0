// Package store is the dead-letter queue as the dlq tool sees it: the records
// of webhooks.dlq (Entry), the operators' resolutions of them on the
// compacted webhooks.dlq-status (Resolution), and the filters, selections and
// statistics the CLI and the admin API share.
//
// Every read is a bounded scan: from each partition's log start to its last
// stable offset at the moment of the call (kadm ListCommittedOffsets),
// read_committed, so a command never waits for records that arrive after it
// started and never shows a transaction the processor has not committed.
package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Ref names one DLQ record, "<partition>:<offset>" (DESIGN §2): the key of its
// resolution on webhooks.dlq-status, and "dlq:"+ref is the replay id.
type Ref struct {
	Partition int32
	Offset    int64
}

// ErrBadRef is wrapped by ParseRef's errors.
var ErrBadRef = errors.New("bad ref")

// ParseRef reads "<partition>:<offset>": two decimal numbers without sign or
// leading zeros, the form of the dlq-status schema's ref.
func ParseRef(s string) (Ref, error) {
	ps, os, ok := strings.Cut(s, ":")
	if !ok {
		return Ref{}, fmt.Errorf("%w %q: want <partition>:<offset>, such as 3:1187", ErrBadRef, s)
	}
	p, err1 := decimal(ps, 31)
	o, err2 := decimal(os, 63)
	if err1 != nil || err2 != nil {
		return Ref{}, fmt.Errorf("%w %q: want <partition>:<offset> as two whole numbers, such as 3:1187", ErrBadRef, s)
	}
	return Ref{Partition: int32(p), Offset: o}, nil
}

func decimal(s string, bits int) (int64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a decimal")
	}
	return strconv.ParseInt(s, 10, bits+1)
}

// String is "<partition>:<offset>".
func (r Ref) String() string {
	return strconv.Itoa(int(r.Partition)) + ":" + strconv.FormatInt(r.Offset, 10)
}

// ReplayID is the hookline.replay-id of a replay of this record:
// "dlq:<partition>:<offset>".
func (r Ref) ReplayID() string { return "dlq:" + r.String() }

// Less orders refs by partition, then offset.
func (r Ref) Less(o Ref) bool {
	if r.Partition != o.Partition {
		return r.Partition < o.Partition
	}
	return r.Offset < o.Offset
}
