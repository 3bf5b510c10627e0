package api

import (
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookline/hookline/pkg/envconf"
)

// IPLimit is the per-client-address rate limit on POST /webhooks/{provider}
// (HOOKLINE_IP_RATE_LIMIT and HOOKLINE_TRUSTED_PROXIES).
type IPLimit struct {
	PerSecond float64
	Burst     int
	// Trusted are the proxies whose X-Forwarded-For is believed; empty: the
	// header is ignored and the peer address is the client.
	Trusted []netip.Prefix
	// MaxAddresses bounds the table of addresses; 0 is DefaultMaxAddresses.
	MaxAddresses int
}

// DefaultMaxAddresses is how many client addresses the per-IP limit keeps
// state for. Past it, the address seen least recently is forgotten (its
// next request starts with a full burst).
const DefaultMaxAddresses = 65536

// ParseIPRateLimit reads HOOKLINE_IP_RATE_LIMIT: "per_second/burst", such
// as "5/10" or "0.5/3"; "" and "off" give nil (no limit).
func ParseIPRateLimit(v string) (*IPLimit, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "off" {
		return nil, nil
	}
	bad := func(why string) error {
		return &envconf.Error{Name: "HOOKLINE_IP_RATE_LIMIT", Value: v, Why: why, Want: "per_second/burst such as 5/10, or off"}
	}
	ps, b, ok := strings.Cut(v, "/")
	if !ok {
		return nil, bad("no /")
	}
	perSecond, err := strconv.ParseFloat(strings.TrimSpace(ps), 64)
	if err != nil || !(perSecond > 0) || perSecond > 1e9 {
		return nil, bad("per_second must be a positive number")
	}
	burst, err := strconv.Atoi(strings.TrimSpace(b))
	if err != nil || burst < 1 || burst > 1e9 {
		return nil, bad("burst must be a positive whole number")
	}
	return &IPLimit{PerSecond: perSecond, Burst: burst}, nil
}

// ParseTrustedProxies reads HOOKLINE_TRUSTED_PROXIES: comma-separated
// CIDRs (10.0.0.0/8, fd00::/8) or single addresses.
func ParseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.Contains(f, "/") {
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return nil, badProxies(v, fmt.Sprintf("%q is not a CIDR", f))
			}
			if p.Addr().Is4In6() {
				if p.Bits() < 96 {
					return nil, badProxies(v, fmt.Sprintf("%q: an IPv4-mapped prefix needs at least 96 bits", f))
				}
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, badProxies(v, fmt.Sprintf("%q is not an IP address or CIDR", f))
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

func badProxies(v, why string) error {
	return &envconf.Error{Name: "HOOKLINE_TRUSTED_PROXIES", Value: strings.TrimSpace(v), Why: why, Want: "addresses or CIDRs such as 10.0.0.0/8, comma-separated"}
}

// ipLimiter keeps one token bucket per client address, in a table of at
// most max entries kept in least-recently-used order.
type ipLimiter struct {
	perSecond rate.Limit
	burst     int
	trusted   []netip.Prefix
	max       int

	mu         sync.Mutex
	table      map[netip.Addr]*ipEntry
	head, tail *ipEntry // most and least recently used
}

type ipEntry struct {
	addr       netip.Addr
	lim        *rate.Limiter
	prev, next *ipEntry
}

func newIPLimiter(l IPLimit) *ipLimiter {
	if l.MaxAddresses <= 0 {
		l.MaxAddresses = DefaultMaxAddresses
	}
	return &ipLimiter{
		perSecond: rate.Limit(l.PerSecond), burst: l.Burst, trusted: l.Trusted, max: l.MaxAddresses,
		table: map[netip.Addr]*ipEntry{},
	}
}

// allow takes a token from the request's client address, or answers 429.
func (l *ipLimiter) allow(r *http.Request, now time.Time) *apiError {
	addr := l.client(r)
	return limit(l.get(addr), now, "rate limit of client address "+addr.String())
}

// get returns addr's bucket, making it (and forgetting the least recently
// used address when the table is full) if addr is new.
func (l *ipLimiter) get(addr netip.Addr) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.table[addr]; ok {
		l.unlink(e)
		l.pushFront(e)
		return e.lim
	}
	if len(l.table) >= l.max {
		old := l.tail
		l.unlink(old)
		delete(l.table, old.addr)
	}
	e := &ipEntry{addr: addr, lim: rate.NewLimiter(l.perSecond, l.burst)}
	l.table[addr] = e
	l.pushFront(e)
	return e.lim
}

func (l *ipLimiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.table)
}

func (l *ipLimiter) unlink(e *ipEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (l *ipLimiter) pushFront(e *ipEntry) {
	e.next = l.head
	if l.head != nil {
		l.head.prev = e
	}
	l.head = e
	if l.tail == nil {
		l.tail = e
	}
}

// client is the address a request is limited by: the peer address, unless
// it is a trusted proxy. Then X-Forwarded-For (every such header, in order,
// as one comma-separated list) is walked from the right, skipping trusted
// proxies: the first address that is not trusted is the client. An entry
// that is not an address (with or without a port) ends the walk and the
// last trusted hop is the client; so is it when every entry is trusted.
// IPv4-mapped IPv6 addresses count as IPv4.
func (l *ipLimiter) client(r *http.Request) netip.Addr {
	addr := parseHop(r.RemoteAddr)
	if len(l.trusted) == 0 || !l.isTrusted(addr) {
		return addr
	}
	xff := r.Header.Values("X-Forwarded-For")
	for i := len(xff) - 1; i >= 0; i-- {
		rest := xff[i]
		for rest != "" {
			hop := rest
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				hop, rest = rest[j+1:], rest[:j]
			} else {
				rest = ""
			}
			if strings.TrimSpace(hop) == "" {
				continue
			}
			a := parseHop(hop)
			if !a.IsValid() {
				return addr
			}
			if !l.isTrusted(a) {
				return a
			}
			addr = a
		}
	}
	return addr
}

func (l *ipLimiter) isTrusted(a netip.Addr) bool {
	for _, p := range l.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads "1.2.3.4", "1.2.3.4:5678", "::1" or "[::1]:5678"; the zero
// Addr when it is none of those.
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	return netip.Addr{}
}
