package rpc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

var codecs = []codec.Codec{codec.JSON, codec.MsgPack}

// pair starts two connected Conns; the first serves h.
func pair(t *testing.T, c codec.Codec, srv, cli *Options) (*Conn, *Conn) {
	t.Helper()
	a, b := NewPipe(16)
	s := NewConn(a, c, srv)
	k := NewConn(b, c, cli)
	ctx := context.Background()
	s.Start(ctx)
	k.Start(ctx)
	t.Cleanup(func() {
		a.Close()
		s.Close()
		k.Close()
	})
	return s, k
}

type echo struct {
	N    int    `json:"n"`
	Text string `json:"text"`
}

func forEachCodec(t *testing.T, f func(t *testing.T, c codec.Codec)) {
	for _, c := range codecs {
		t.Run(c.Name(), func(t *testing.T) { f(t, c) })
	}
}

func TestCallBothDirections(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			var p echo
			if err := r.Decode(&p); err != nil {
				return nil, err
			}
			return echo{N: p.N + 1, Text: r.Method + ":" + p.Text}, nil
		})
		s, k := pair(t, c, &Options{Handler: h}, &Options{Handler: h})
		ctx := context.Background()
		var got echo
		if err := k.Call(ctx, "up", echo{N: 1, Text: "é"}, &got); err != nil || got != (echo{2, "up:é"}) {
			t.Fatalf("client→server: %+v %v", got, err)
		}
		if err := s.Call(ctx, "down", echo{N: 41, Text: "x"}, &got); err != nil || got != (echo{42, "down:x"}) {
			t.Fatalf("server→client: %+v %v", got, err)
		}
	})
}

func TestConcurrentRequestsMatchedByID(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		var running, most atomic.Int32
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			var p echo
			if err := r.Decode(&p); err != nil {
				return nil, err
			}
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			return p, nil
		})
		_, k := pair(t, c, &Options{Handler: h, MaxConcurrent: 8}, nil)
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := 0; i < 200; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var got echo
				if err := k.Call(context.Background(), "echo", echo{N: i}, &got); err != nil {
					errs <- err
				} else if got.N != i {
					errs <- fmt.Errorf("call %d got %d", i, got.N)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if m := most.Load(); m > 8 || m < 2 {
			t.Fatalf("%d requests were handled at once, want at most MaxConcurrent (8) and some concurrency", m)
		}
	})
}

func TestRequestsRunConcurrently(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		release := make(chan struct{})
		var started atomic.Int32
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			if started.Add(1) == 2 {
				close(release)
			}
			select {
			case <-release:
				return "ok", nil
			case <-time.After(10 * time.Second):
				return nil, errors.New("requests were serialized")
			}
		})
		_, k := pair(t, c, &Options{Handler: h}, nil)
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := k.Call(context.Background(), "wait", nil, nil); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	})
}

func TestNotificationsInOrder(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		var mu sync.Mutex
		var got []int
		done := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			var p echo
			if err := r.Decode(&p); err != nil {
				return nil, err
			}
			if p.N%7 == 0 {
				time.Sleep(100 * time.Microsecond) // slow handlers must not reorder
			}
			mu.Lock()
			got = append(got, p.N)
			if len(got) == 1000 {
				close(done)
			}
			mu.Unlock()
			return nil, nil
		})
		_, k := pair(t, c, &Options{Handler: h}, nil)
		for i := 0; i < 1000; i++ {
			if err := k.Notify(context.Background(), "n", echo{N: i}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("notifications not all handled")
		}
		for i, n := range got {
			if n != i {
				t.Fatalf("notification %d handled at position %d", n, i)
			}
		}
	})
}

func TestInlineRequestHoldsLaterMessages(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		var authDone atomic.Bool
		authStarted := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			switch r.Method {
			case "auth":
				close(authStarted)
				time.Sleep(50 * time.Millisecond)
				authDone.Store(true)
				return "authed", nil
			default:
				if !authDone.Load() {
					return nil, Errorf(apiCode(-32001), "ran before auth finished")
				}
				return "ok", nil
			}
		})
		_, k := pair(t, c, &Options{Handler: h, Hooks: &hookFuncs{inline: func(m string) bool { return m == "auth" }}}, nil)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := k.Call(context.Background(), "auth", nil, nil); err != nil {
				t.Error(err)
			}
		}()
		<-authStarted // the ping goes out while the auth is being handled
		if err := k.Call(context.Background(), "system.ping", nil, nil); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	})
}

// apiCode is an error code of an API built on rpc, as package protocol's are.
type apiCode int

func (c apiCode) Error() string  { return "api error " + strconv.Itoa(int(c)) }
func (c apiCode) ErrorCode() int { return int(c) }

func TestErrors(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			switch r.Method {
			case "params":
				var p echo
				return nil, r.Decode(&p)
			case "wrapped":
				return nil, fmt.Errorf("stream.subscribe: bad stream name: %w", ErrInvalidParams)
			case "typed":
				return nil, Errorf(apiCode(-32010), "from_seq is too old")
			case "coded":
				return nil, apiCode(-32009)
			case "wrapped coded":
				return nil, fmt.Errorf("planner.watch: %w", apiCode(-32009))
			case "internal":
				return nil, errors.New("database password is hunter2")
			case "panic":
				panic("boom")
			}
			return nil, Errorf(ErrMethodNotFound, "method %s not found", r.Method)
		})
		_, k := pair(t, c, &Options{Handler: h}, nil)
		ctx := context.Background()
		for _, tc := range []struct {
			method, params string
			code           int
			msg            string
		}{
			{"x", "", -32601, "method x not found"},
			{"params", "bad", -32602, ""},
			{"wrapped", "", -32602, "stream.subscribe: bad stream name: invalid params"},
			{"typed", "", -32010, "from_seq is too old"},
			{"coded", "", -32009, "api error -32009"},
			{"wrapped coded", "", -32009, "planner.watch: api error -32009"},
			{"internal", "", -32603, "internal error"},
			{"panic", "", -32603, "internal error"},
		} {
			var params any
			if tc.params != "" {
				params = map[string]any{"n": "not a number"}
			}
			err := k.Call(ctx, tc.method, params, nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code || (tc.msg != "" && e.Message != tc.msg) {
				t.Errorf("%s: got %v (%#v), want %d %q", tc.method, err, e, tc.code, tc.msg)
			}
			if !errors.Is(err, apiCode(tc.code)) || errors.Is(err, apiCode(tc.code+1)) || Code(err) != tc.code {
				t.Errorf("%s: %v does not match its code %d alone", tc.method, err, tc.code)
			}
		}
	})
}

// rawPeer drives a Conn with hand-written frames.
func rawPeer(t *testing.T, c codec.Codec, h Handler) (*PipeEnd, *Conn) {
	a, b := NewPipe(16)
	s := NewConn(a, c, &Options{Handler: h})
	s.Start(context.Background())
	t.Cleanup(func() { a.Close(); s.Close() })
	return b, s
}

func readMsg(t *testing.T, p *PipeEnd, c codec.Codec) *codec.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	data, err := p.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m codec.Message
	if err := c.Decode(data, &m); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return &m
}

func TestDecodeErrorResponses(t *testing.T) {
	c := codec.JSON
	p, _ := rawPeer(t, c, HandlerFunc(func(ctx context.Context, r *Request) (any, error) { return "pong", nil }))
	ctx := context.Background()
	for _, tc := range []struct {
		in    string
		code  int
		hasID bool
		id    int64
		msg   string
	}{
		{`{"jsonrpc":"2.0",`, -32700, false, 0, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"a"}]`, -32600, false, 0, "batch requests are not supported"},
		{`{"jsonrpc":"2.0","id":"1","method":"a"}`, -32600, false, 0, ""},
		{`{"jsonrpc":"2.0","id":4,"method":"a","params":3}`, -32600, true, 4, ""},
	} {
		if err := p.Write(ctx, []byte(tc.in)); err != nil {
			t.Fatal(err)
		}
		m := readMsg(t, p, c)
		if m.Error == nil || m.Error.Code != tc.code || m.HasID != tc.hasID || m.ID != tc.id || (tc.msg != "" && m.Error.Message != tc.msg) {
			t.Errorf("%s: got %+v %+v", tc.in, m, m.Error)
		}
	}
	// An unknown notification gets no reply: the next reply is the ping's.
	_ = p.Write(ctx, []byte(`{"jsonrpc":"2.0","method":"nobody.home","params":{}}`))
	_ = p.Write(ctx, []byte(`{"jsonrpc":"2.0","id":9,"method":"system.ping"}`))
	if m := readMsg(t, p, c); m.ID != 9 || m.Error != nil {
		t.Fatalf("got %+v", m)
	}
}

func TestUnknownNotificationIgnored(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		p, _ := rawPeer(t, c, nil)
		ctx := context.Background()
		note, _ := c.Encode(nil, &codec.Message{Method: "nobody.home"})
		req, _ := c.Encode(nil, &codec.Message{Method: "x", ID: 3, HasID: true})
		_ = p.Write(ctx, note)
		_ = p.Write(ctx, req)
		m := readMsg(t, p, c)
		if m.ID != 3 || m.Error == nil || m.Error.Code != -32601 || m.Error.Message != "method x not found" {
			t.Fatalf("got %+v %+v", m, m.Error)
		}
	})
}

func TestCloseFailsPendingCalls(t *testing.T) {
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		block := make(chan struct{})
		handling := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) {
			close(handling)
			select {
			case <-block:
			case <-ctx.Done():
			}
			return nil, ctx.Err()
		})
		s, k := pair(t, c, &Options{Handler: h}, nil)
		errc := make(chan error, 1)
		go func() { errc <- k.Call(context.Background(), "hang", nil, nil) }()
		<-handling // the call is pending: sent, and its handler runs
		s.Close()  // cancels the handler and ends the server side
		k.Close()
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("got %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("pending call not failed")
		}
		close(block)
		if err := k.Call(context.Background(), "x", nil, nil); !errors.Is(err, ErrClosed) {
			t.Fatalf("call after close: %v", err)
		}
		leaktest.Check(t, 30*time.Second)
	})
}

func TestTransportFailureEndsConn(t *testing.T) {
	a, b := NewPipe(1)
	k := NewConn(a, codec.MsgPack, nil)
	k.Start(context.Background())
	b.Close()
	select {
	case <-k.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("conn did not end")
	}
	if !errors.Is(k.Err(), ErrPipeClosed) {
		t.Fatalf("Err = %v", k.Err())
	}
	k.Close()
	k.Close()
}
