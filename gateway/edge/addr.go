package edge

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// KeyOf is a client address as the per-address limits count it: an IPv4 address, or an
// IPv6 address's /64 (one subscriber's network).
func KeyOf(a netip.Addr) netip.Addr {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// peerAddr is the IP address of a socket's peer, or the zero Addr.
func peerAddr(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// TrustedProxy reports whether a is a trusted proxy's (BALLET_TRUSTED_PROXIES).
func (r *Sockets) TrustedProxy(a netip.Addr) bool {
	for _, p := range r.o.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddr is the address a request comes from: its socket's peer, unless that peer is a
// trusted proxy (BALLET_TRUSTED_PROXIES); then the right-most X-Forwarded-For entry that is
// not a trusted proxy (the left-most if all are). An entry that is not an address ends the
// walk at the last trusted hop.
func (r *Sockets) ClientAddr(req *http.Request) netip.Addr {
	peer := netip.Addr{}
	if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil {
		peer = ap.Addr().Unmap()
	}
	if !peer.IsValid() || !r.TrustedProxy(peer) {
		return peer
	}
	var hops []string
	for _, v := range req.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return client
		}
		client = a
		if !r.TrustedProxy(a) {
			return a
		}
	}
	return client
}

// parseHop parses one X-Forwarded-For entry: an address, with a port or in brackets.
func parseHop(h string) (netip.Addr, bool) {
	h = strings.TrimSpace(h)
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap(), true
	}
	if a, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return a.Unmap(), true
	}
	return netip.Addr{}, false
}
