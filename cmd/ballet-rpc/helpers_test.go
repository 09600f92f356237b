package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// buffer is an output that tests read while the command runs.
type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// lines returns the complete lines written so far.
func (b *buffer) lines() []string {
	s := b.String()
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// result is a finished run.
type result struct {
	code           int
	stdout, stderr string
}

// runCmd runs the command to completion.
func runCmd(t testing.TB, env map[string]string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut buffer
	code := run(ctx, args, func(k string) string { return env[k] }, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// running is a command running in the background.
type running struct {
	out, err buffer
	cancel   context.CancelFunc
	done     chan int
}

func start(t testing.TB, env map[string]string, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- run(ctx, args, func(k string) string { return env[k] }, &r.out, &r.err) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop interrupts the command and returns its exit status.
func (r *running) stop(t testing.TB) int {
	r.cancel()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not stop")
		return -1
	}
}

// waitLines waits until the command printed at least n lines.
func (r *running) waitLines(t testing.TB, n int) []string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if l := r.out.lines(); len(l) >= n {
			return l
		}
		select {
		case code := <-r.done:
			r.done <- code
			t.Fatalf("the command exited with %d before printing %d lines; stdout:\n%s\nstderr:\n%s", code, n, r.out.String(), r.err.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %d lines; stdout:\n%s\nstderr:\n%s", n, r.out.String(), r.err.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func decode(t testing.TB, line string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("not one JSON object per line: %q: %v", line, err)
	}
	return m
}

func startEnv(t testing.TB, pg bool) *gatewaytest.Env {
	t.Helper()
	env := gatewaytest.Start(t, &gatewaytest.Options{Postgres: pg, Config: gateway.Config{}})
	env.Project(t, "WEB", "alice", "admin", "bob", "viewer")
	return env
}

// dropper is a TCP proxy whose open connections a test can reset.
type dropper struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startDropper(t testing.TB, target string) *dropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{ln: ln}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				down.Close()
				continue
			}
			d.mu.Lock()
			d.conns = append(d.conns, down, up)
			d.mu.Unlock()
			d.wg.Add(2)
			for _, p := range [][2]net.Conn{{down, up}, {up, down}} {
				go func() {
					defer d.wg.Done()
					_, _ = io.Copy(p[1], p[0])
					p[0].Close()
					p[1].Close()
				}()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		d.drop()
		d.wg.Wait()
	})
	return d
}

func (d *dropper) url() string { return "ws://" + d.ln.Addr().String() + "/rpc" }

func (d *dropper) drop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	d.conns = nil
}
