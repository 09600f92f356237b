package edge

import "net/netip"

// Counts are the sockets' counts at one moment: open is counted against BALLET_MAX_CONNECTIONS;
// pending against BALLET_MAX_PENDING_SOCKETS (new, or with a request being read or served);
// addr, the sockets and unauthenticated sessions of a's address, against
// BALLET_MAX_CONNECTIONS_PER_IP.
func (r *Sockets) Counts(a netip.Addr) (open, pending, addr int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.open, r.pending, r.addrs[KeyOf(a)]
}
