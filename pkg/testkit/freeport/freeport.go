// Package freeport picks loopback TCP ports for the processes that tests
// and benchmarks start (services, brokers, Jaeger, Prometheus), which take
// an address to listen on rather than a listener.
//
// A port the kernel hands out for "127.0.0.1:0" comes from its ephemeral
// range, the same range it takes the source port of every outgoing
// connection from: between the pick and the child's bind, any client in
// the machine (a test's HTTP client, a Kafka connection) may take it, and
// the child fails with "address already in use". The ports here come from
// below that range, where no outgoing connection lands; what is left is
// another process picking the same port in the same instant, which
// [Listen] callers that can retry handle with [InUse].
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// span is how many ports below the ephemeral range are candidates.
const span = 12000

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports this process handed out
)

// Addr is "127.0.0.1:<port>" for a port that was free just now, below the
// kernel's ephemeral range, and not handed out before by this process.
func Addr() (string, error) {
	ps, err := Ports(1)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(ps[0])), nil
}

// Ports is n distinct ports as Addr picks them.
func Ports(n int) ([]int, error) {
	lo, hi := candidates()
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 4*span {
			return nil, fmt.Errorf("freeport: no free loopback port in %d-%d after %d tries", lo, hi-1, tries)
		}
		p := lo + rand.IntN(hi-lo)
		if given[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // in use, or refused: try another
		}
		ln.Close()
		given[p] = true
		out = append(out, p)
	}
	return out, nil
}

// InUse reports whether err, or a process's output, says its address was
// taken: the sign to pick another port and start again.
func InUse(err error, output string) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(output, "address already in use")
}

// candidates is [lo, hi): the span of ports just below the ephemeral
// range (/proc/sys/net/ipv4/ip_local_port_range; 32768 where it cannot
// be read), and at least 1024.
func candidates() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 1024+1000 {
				hi = v
			}
		}
	}
	lo = max(hi-span, 1024)
	return lo, hi
}
