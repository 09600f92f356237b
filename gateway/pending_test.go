package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// BALLET_MAX_PENDING_SOCKETS bounds the sockets that are not yet a session, across all
// addresses: 78 sockets from 39 addresses (2 each, within each address's limit) that send
// part of a request header, against a bound of 32. The replica never counts more than 32
// pending, refuses the rest (a whole request is answered 503 with Retry-After), an
// authenticated session keeps being served meanwhile (sessions are not pending), and a new
// client gets in once the request-header deadline frees the places.
func TestPendingSocketsBoundedAcrossAddresses(t *testing.T) {
	t.Parallel() // it waits out the request-header deadline, on a server of its own
	const max, addrs, perAddr = 32, 39, 2
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{
		MaxPendingSockets: max, AuthTimeout: time.Minute, DrainWindow: 10 * time.Millisecond,
	}})
	session := login(t, env, codec.JSON, "bob")
	u, _ := url.Parse(env.URL)
	stop := make(chan struct{})
	var peak atomic.Int64
	var watch sync.WaitGroup
	watch.Go(func() { sample(stop, &peak, func() int { return gateway.PendingSockets(env.Server) }) })

	for i := range addrs * perAddr {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fmt.Sprintf("127.0.0.%d", 2+i%addrs))}}
		c, err := d.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")) // and never the rest
	}
	const refused = addrs*perAddr - max
	eventually(t, "the surplus refused", func() bool {
		return limitRejections(t, env.Server, "pending_sockets") == refused && gateway.PendingSockets(env.Server) == max
	})
	// A whole request now is answered 503 with Retry-After.
	probe, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	_ = probe.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := probe.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request while %d sockets are pending: %v %v, want 503 with Retry-After", max, resp, err)
	}
	session.mustCall("system.ping", nil, nil)
	took := legitimate(t, env, 20*time.Second)
	close(stop)
	watch.Wait()
	t.Logf("%d sockets sending part of a header from %d addresses: %v refused, at most %d pending (bound %d); "+
		"a new client got in after %v", addrs*perAddr, addrs, limitRejections(t, env.Server, "pending_sockets"), peak.Load(), max, took)
	if peak.Load() > max {
		t.Fatalf("%d sockets pending at once, bound %d", peak.Load(), max)
	}
}
