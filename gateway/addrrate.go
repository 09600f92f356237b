// The per-address rate of what is not authenticated (BALLET_ADDR_RATE): one budget per client
// address (an IPv6 address's /64), spent by each /rpc upgrade and by each REST request or auth
// whose token is missing or refused. A token's verification is what costs: an address whose
// failures have spent its budget is refused before its tokens are verified, while a client
// whose tokens are valid spends only its upgrades and is never refused for the failures of
// another.

package gateway

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/internal/httpapi"
)

// newAddrRate keeps the budgets by a hash of the address, forgetting one idle for 2 s: at
// most 100,000 addresses (docs/capacity.md).
func (s *Server) newAddrRate() *httpapi.SubjectRate {
	return httpapi.NewSubjectRate(&httpapi.RateOptions{Rate: s.cfg.AddrRate, Limit: limitAddrRate,
		OnRefused: func() { s.metrics.LimitRejections.WithLabelValues(limitAddrRate).Inc() }})
}

// rateAddr is the address r's budget is kept by, invalid when it is unknown (not limited).
func (s *Server) rateAddr(r *http.Request) netip.Addr {
	a := s.clientAddr(r)
	if !a.IsValid() {
		return a
	}
	return edge.KeyOf(a)
}

// admitUpgrade spends a token of the client's address for a /rpc upgrade; false when it has
// none, answered 429 with Retry-After before the upgrade.
func (s *Server) admitUpgrade(w http.ResponseWriter, r *http.Request) bool {
	err := s.admitAddr(r)
	if err == nil {
		return true
	}
	_, _, retry := err.(httpapi.Limited).Limited()
	w.Header().Set("Retry-After", strconv.Itoa(int((retry+time.Second-1)/time.Second)))
	http.Error(w, "too many connections and failed authentications from this address; try again later",
		http.StatusTooManyRequests)
	return false
}

// addrLimited serves a REST request unless its address's failures have spent its budget
// (429, a problem with Retry-After, as BALLET_REST_RATE's); a request answered 401, its token
// missing or refused, spends a token.
func (s *Server) addrLimited(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := s.rateAddr(r)
		if !a.IsValid() {
			h.ServeHTTP(w, r)
			return
		}
		if err := s.addrRate.CheckAddr(a); err != nil {
			httpapi.WriteProblem(w, r, err)
			return
		}
		sw := edge.NewStatusWriter(w)
		h.ServeHTTP(sw, r)
		if sw.Status == http.StatusUnauthorized {
			s.addrRate.ChargeAddr(a)
		}
	})
}

// checkAuthAddr refuses an auth before its token is verified when the connection's address
// has spent its budget on failures: the -32029 error of limitAddrRate.
func (s *session) checkAuthAddr() error {
	a := s.rateAddr()
	if !a.IsValid() {
		return nil
	}
	err := s.srv.addrRate.CheckAddr(a)
	if err == nil {
		return nil
	}
	_, _, retry := err.(httpapi.Limited).Limited()
	return limitExceeded(limitAddrRate, s.srv.cfg.AddrRate, retry)
}

// chargeAuthAddr spends a token of the connection's address for a failed auth.
func (s *session) chargeAuthAddr() {
	if a := s.rateAddr(); a.IsValid() {
		s.srv.addrRate.ChargeAddr(a)
	}
}

// rateAddr is the connection's address, until it is authenticated.
func (s *session) rateAddr() netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return netip.Addr(s.addr)
}
