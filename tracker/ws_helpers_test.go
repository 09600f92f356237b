package tracker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker/trackertest"
)

// rpcClient is a bare MessagePack client of /rpc: raw frames in, decoded messages out.
type rpcClient struct {
	t      *testing.T
	ws     *websocket.Conn
	c      codec.Codec
	msgs   chan *codec.Message
	done   chan struct{}
	err    error // why reading ended; valid after done
	nextID int64
	held   []*codec.Message // read but not yet consumed, in order
}

// dialRPC connects to the gateway and authenticates as subject.
func dialRPC(t *testing.T, env *gatewaytest.Env, subject string) *rpcClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, env.URL, &websocket.DialOptions{Subprotocols: []string{codec.NameMsgPack}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(16 << 20)
	k := &rpcClient{t: t, ws: ws, c: codec.MsgPack, msgs: make(chan *codec.Message, 1<<16), done: make(chan struct{})}
	go k.readLoop()
	t.Cleanup(k.close)
	if e := k.call("auth", map[string]any{"token": env.Token(t, subject)}, nil); e != nil {
		t.Fatalf("auth as %s: %d %s", subject, e.Code, e.Message)
	}
	return k
}

// close drops the connection, as a network failure would, and waits for the reader.
func (k *rpcClient) close() {
	k.ws.CloseNow()
	<-k.done
}

func (k *rpcClient) readLoop() {
	defer close(k.done)
	for {
		_, data, err := k.ws.Read(context.Background())
		if err != nil {
			k.err = err
			return
		}
		var m codec.Message
		if err := k.c.Decode(data, &m); err != nil {
			k.err = fmt.Errorf("undecodable frame: %v", err)
			return
		}
		select {
		case k.msgs <- &m:
		default:
			k.err = errors.New("test client queue full")
			return
		}
	}
}

var errTimeout = errors.New("timeout waiting for a message")

// next returns the next message that is not a heartbeat.
func (k *rpcClient) next(timeout time.Duration) (*codec.Message, error) {
	if len(k.held) > 0 {
		m := k.held[0]
		k.held = k.held[1:]
		return m, nil
	}
	deadline := time.After(timeout)
	for {
		select {
		case m := <-k.msgs:
			if m.Method != "$/heartbeat" {
				return m, nil
			}
		case <-k.done:
			select {
			case m := <-k.msgs:
				if m.Method != "$/heartbeat" {
					return m, nil
				}
				continue
			default:
			}
			return nil, fmt.Errorf("connection ended: %v", k.err)
		case <-deadline:
			return nil, errTimeout
		}
	}
}

// call sends a request and waits for its response; notifications that arrive first are
// kept for later reads.
func (k *rpcClient) call(method string, params, result any) *codec.Error {
	k.t.Helper()
	k.nextID++
	id := k.nextID
	m := &codec.Message{ID: id, HasID: true, Method: method}
	raw, err := k.c.Marshal(params)
	if err != nil {
		k.t.Fatal(err)
	}
	m.Params = raw
	frame, err := k.c.Encode(nil, m)
	if err != nil {
		k.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.ws.Write(ctx, websocket.MessageBinary, frame); err != nil {
		k.t.Fatalf("write %s: %v", method, err)
	}
	var held []*codec.Message
	defer func() { k.held = append(k.held, held...) }()
	for {
		m, err := k.next(15 * time.Second)
		if err != nil {
			k.t.Fatalf("waiting for the %s response: %v", method, err)
		}
		if m.IsResponse() && m.HasID && m.ID == id {
			if m.Error != nil {
				return m.Error
			}
			if result != nil {
				if err := k.c.Unmarshal(m.Result, result); err != nil {
					k.t.Fatalf("result of %s: %v", method, err)
				}
			}
			return nil
		}
		held = append(held, m)
	}
}

// subscribe subscribes and returns the log position at subscription time.
func (k *rpcClient) subscribe(id, stream string, fromSeq *int64) (int64, *codec.Error) {
	k.t.Helper()
	params := map[string]any{"subscription": id, "stream": stream}
	if fromSeq != nil {
		params["from_seq"] = *fromSeq
	}
	var res struct {
		Subscription string `json:"subscription"`
		Seq          int64  `json:"seq"`
	}
	if e := k.call("stream.subscribe", params, &res); e != nil {
		return 0, e
	}
	if res.Subscription != id {
		k.t.Fatalf("subscribed %q, want %q", res.Subscription, id)
	}
	return res.Seq, nil
}

type closedParams struct {
	Subscription string `json:"subscription"`
	Reason       string `json:"reason"`
}

// nextNotice returns the next stream.event (ev set) or stream.closed (closed set).
func (k *rpcClient) nextNotice(timeout time.Duration) (sub string, ev *streams.Event, closed *closedParams, err error) {
	for {
		m, err := k.next(timeout)
		if err != nil {
			return "", nil, nil, err
		}
		switch m.Method {
		case "stream.event":
			var s struct {
				Subscription string `json:"subscription"`
			}
			var w streams.WireEvent
			if err := k.c.Unmarshal(m.Params, &s); err != nil {
				return "", nil, nil, err
			}
			if err := k.c.Unmarshal(m.Params, &w); err != nil {
				return "", nil, nil, err
			}
			e := trackertest.WireToEvent(&w)
			return s.Subscription, &e, nil, nil
		case "stream.closed":
			var c closedParams
			if err := k.c.Unmarshal(m.Params, &c); err != nil {
				return "", nil, nil, err
			}
			return c.Subscription, nil, &c, nil
		}
	}
}
