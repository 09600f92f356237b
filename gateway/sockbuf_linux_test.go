package gateway_test

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// The kernel's buffers of a client socket are bounded by BALLET_SOCKET_BUFFER_BYTES: for a
// client that subscribes and stops reading, the bytes the server's side of its socket holds
// unsent (its send queue, read off /proc/net/tcp) stay within about twice the setting (the
// kernel keeps twice what it is given), where the kernel's own autotuning lets them grow to
// net.ipv4.tcp_wmem's maximum (4 MiB here). The connection's queue, lifted out of the way,
// holds the rest.
func TestSocketBuffersAreBounded(t *testing.T) {
	const sockBuf, events, payload = 64 << 10, 200, 20 << 10
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: true, Config: gateway.Config{
		SocketBufferBytes: sockBuf, ConnectionQueueBytes: 64 << 20, HeartbeatInterval: 10 * time.Minute,
	}})
	env.Project(t, "WEB", "alice", "viewer")
	c, answers := pausedConn(t, env, "alice", []string{request(2, "stream.subscribe", map[string]any{"subscription": "s", "stream": "project:WEB"})})
	answers.wantNoErrors()
	// From here on the client reads nothing.

	u, _ := url.Parse(env.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	serverPort, _ := strconv.Atoi(port)
	clientPort := c.LocalAddr().(*net.TCPAddr).Port
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if q, ok := sendQueue(t, serverPort, clientPort); ok {
				peak.Store(max(peak.Load(), q))
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	commitPaced(t, env, events, payload, func(j int) string { return fmt.Sprintf("WEB-%d", 1+j%8) })
	// Whatever the gateway could hand the socket, it has: its send queue is as full as the
	// kernel lets it be.
	eventually(t, "the server's send queue to fill", func() bool { return peak.Load() >= sockBuf })
	time.Sleep(100 * time.Millisecond) // a few more samples at the full queue
	close(stop)
	<-sampled
	bound := int64(2*sockBuf + 64<<10)
	t.Logf("the server's send queue to the client that stopped reading peaked at %d bytes (setting %d, bound %d)", peak.Load(), sockBuf, bound)
	if peak.Load() > bound {
		t.Fatalf("the server's send queue held %d bytes, bound %d", peak.Load(), bound)
	}
}

// sendQueue is the tx_queue of the server's socket on serverPort to the client's port, from
// /proc/net/tcp and tcp6; false when there is none.
func sendQueue(t *testing.T, serverPort, clientPort int) (int64, bool) {
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 5 || !strings.Contains(fs[1], ":") {
				continue
			}
			local, remote := portOf(fs[1]), portOf(fs[2])
			if local != serverPort || remote != clientPort {
				continue
			}
			tx, _, _ := strings.Cut(fs[4], ":")
			q, err := strconv.ParseInt(tx, 16, 64)
			f.Close()
			return q, err == nil
		}
		f.Close()
	}
	return 0, false
}

// portOf is the port of an address of /proc/net/tcp ("0100007F:1F90").
func portOf(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	p, _ := strconv.ParseInt(addr[i+1:], 16, 32)
	return int(p)
}
