package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
)

// maxSourceAddrs bounds --source-addrs: enough for a million connections to one address.
const maxSourceAddrs = 256

// parseSourceAddrs reads --source-addrs: IPv4 or IPv6 addresses separated by commas, each an
// address or a range FIRST-LAST of the same family (127.0.0.2-127.0.0.9).
func parseSourceAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, part := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := netip.ParseAddr(first)
		if err != nil {
			return nil, fmt.Errorf("%q is not an address", first)
		}
		b := a
		if isRange {
			if b, err = netip.ParseAddr(last); err != nil {
				return nil, fmt.Errorf("%q is not an address", last)
			}
			if a.Is4() != b.Is4() || b.Less(a) {
				return nil, fmt.Errorf("%s-%s is not a range", a, b)
			}
		}
		for x := a; ; x = x.Next() {
			if len(out) == maxSourceAddrs {
				return nil, fmt.Errorf("more than %d addresses", maxSourceAddrs)
			}
			out = append(out, x)
			if x == b {
				break
			}
		}
	}
	return out, nil
}

// sourceDialer dials from its addresses in turn. The port is chosen at connect time
// (bindNoPort), so every source address has the whole ephemeral range towards each
// destination, also shared with other processes dialing from the same addresses.
type sourceDialer struct {
	addrs []netip.Addr
	next  atomic.Uint64
}

func (s *sourceDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	a := s.addrs[(s.next.Add(1)-1)%uint64(len(s.addrs))]
	d := net.Dialer{
		Timeout:   30 * time.Second,
		LocalAddr: &net.TCPAddr{IP: a.AsSlice()},
		Control:   bindNoPort,
	}
	return d.DialContext(ctx, network, addr)
}
