package client_test

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// proxy is a TCP proxy in front of the gateway that a test can stop and
// start again on the same port, drop connections on, freeze (existing
// connections stay open but forward nothing; new ones work), or pause
// (existing connections stop reading from the gateway until Resume, as a
// client too slow to keep up).
type proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	pairs map[*pair]struct{}
	wg    sync.WaitGroup
}

type pair struct {
	down, up net.Conn
	mu       sync.Mutex
	cond     *sync.Cond // signalled on Resume and on close
	frozen   bool
	paused   bool
	closed   bool
}

// waitResumed waits while the pair is paused and open; false when it is
// closed.
func (p *pair) waitResumed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.paused && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// waitClosed waits until the pair is closed (Drop, Stop, the proxy's end).
func (p *pair) waitClosed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for !p.closed {
		p.cond.Wait()
	}
}

func (p *pair) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func (p *pair) close(reset bool) {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range []net.Conn{p.down, p.up} {
		if tc, ok := c.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0) // RST: the connection is dropped, not closed
		}
		_ = c.Close()
	}
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	p := &proxy{t: t, target: target, pairs: map[*pair]struct{}{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.Stop)
	return p
}

// URL is the gateway's /rpc through the proxy.
func (p *proxy) URL() string { return "ws://" + p.addr + "/rpc" }

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				_ = down.Close()
				continue
			}
			// A buffer of its own size rather than one the kernel grows to megabytes: a paused
			// connection holds back the gateway soon, as a real proxy's would.
			_ = up.(*net.TCPConn).SetReadBuffer(64 << 10)
			pr := &pair{down: down, up: up}
			pr.cond = sync.NewCond(&pr.mu)
			p.mu.Lock()
			if p.ln != ln { // stopped meanwhile
				p.mu.Unlock()
				pr.close(true)
				continue
			}
			p.pairs[pr] = struct{}{}
			p.mu.Unlock()
			p.wg.Add(2)
			go p.pipe(pr, down, up)
			go p.pipe(pr, up, down)
		}
	}()
}

// pipe copies src to dst until either ends; a frozen pair reads and drops, and holds on at the
// end of src until the pair is closed.
func (p *proxy) pipe(pr *pair, src, dst net.Conn) {
	defer p.wg.Done()
	defer func() {
		pr.close(false)
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		if src == pr.up {
			pr.waitResumed()
		}
		n, err := src.Read(buf)
		if src == pr.up && !pr.waitResumed() {
			return // dropped while paused: what was read is lost with it
		}
		if n > 0 && !pr.isFrozen() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if pr.isFrozen() {
				// A frozen link passes no end either: the other side hears nothing until it
				// gives up by itself (the gateway's heartbeat timeout must not reach the client).
				pr.waitClosed()
				return
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				p.t.Logf("proxy: %v", err)
			}
			return
		}
	}
}

// Drop resets every open connection; the proxy keeps accepting.
func (p *proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.pairs {
		pr.close(true)
	}
}

// Pause makes every open connection stop reading from the gateway.
func (p *proxy) Pause() { p.setPaused(true) }

// Resume lets paused connections read on.
func (p *proxy) Resume() { p.setPaused(false) }

func (p *proxy) setPaused(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.pairs {
		pr.mu.Lock()
		pr.paused = on
		pr.cond.Broadcast()
		pr.mu.Unlock()
	}
}

// Freeze makes every open connection silent in both directions.
func (p *proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.pairs {
		pr.mu.Lock()
		pr.frozen = true
		pr.mu.Unlock()
	}
}

// Stop closes the listener and resets every connection, as a server that
// went away; Start brings it back on the same port.
func (p *proxy) Stop() {
	p.mu.Lock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	p.Drop()
	p.wg.Wait()
}

func (p *proxy) Start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
