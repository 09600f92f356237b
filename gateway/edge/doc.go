// Package edge is the client port's HTTP edge: it counts every socket the port accepts against
// BALLET_MAX_CONNECTIONS, BALLET_MAX_CONNECTIONS_PER_IP and BALLET_MAX_PENDING_SOCKETS, answers
// a socket beyond them 503, gives each socket the deadlines of the state net/http holds it in,
// and names the client's address behind the trusted proxies.
//
// Entry points: New, then Sockets.Listener and Sockets.HTTPServer serve the port; an /rpc
// upgrade takes its address's count over from its socket (SocketOf, Lend, Unlend) or counts it
// itself (AcquireAddr, ReleaseAddr) until its session authenticates. KeyOf is the address as the
// per-address limits count it (an IPv6 address's /64).
//
// Caveat: a socket from a trusted proxy is counted against BALLET_MAX_CONNECTIONS only; its
// clients' addresses are counted by their /rpc sessions.
package edge
