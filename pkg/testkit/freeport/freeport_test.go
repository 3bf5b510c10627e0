package freeport

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestPortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi := candidates()
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(string(b), &first, &last); err == nil && hi != first {
			t.Fatalf("candidates end at %d, the ephemeral range starts at %d", hi, first)
		}
	}
	ps, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p < lo || p >= hi || seen[p] {
			t.Fatalf("port %d: outside [%d, %d) or given twice (%v)", p, lo, hi, ps)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d handed out but cannot be listened on: %v", p, err)
		}
		ln.Close()
	}
}

func TestInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	for _, c := range []struct {
		err  error
		out  string
		want bool
	}{
		{err, "", true},
		{nil, "listen tcp 127.0.0.1:45519: bind: address already in use", true},
		{errors.New("connection refused"), "started", false},
	} {
		if got := InUse(c.err, c.out); got != c.want {
			t.Errorf("InUse(%v, %q) = %v, want %v", c.err, c.out, got, c.want)
		}
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("a second listen on %s: %v, want EADDRINUSE", ln.Addr(), err)
	}
}
