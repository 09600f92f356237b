package wsnet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/rpc"
)

// A frame the transport refuses closes the connection with its code, told to the Owner: text
// that is not UTF-8 once it is read, the wrong kind, a message over the read limit and an
// unmasked frame at their header, before any payload.
func TestTransportRefusesFrames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frame  []byte
		code   websocket.StatusCode
		atRead bool // refused once read; else at its header
	}{
		{"binary frame on a text connection", []byte{0x82, 0x82, 0, 0, 0, 0, 'h', 'i'}, websocket.StatusUnsupportedData, false},
		{"text that is not UTF-8", []byte{0x81, 0x81, 0, 0, 0, 0, 0xff}, websocket.StatusInvalidFramePayloadData, true},
		{"header of a message over the read limit", []byte{0x81, 0x80 | 126, testReadLimit >> 8, 1, 0, 0, 0, 0}, websocket.StatusMessageTooBig, false},
		{"unmasked frame", []byte{0x81, 0x02, 'h', 'i'}, websocket.StatusProtocolError, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestServer(t, nil)
			c, br, a := s.dialRaw(t, nil)
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := a.t.Read(context.Background())
				if !tc.atRead {
					_ = a.t.Close() // as the rpc.Conn does when Read fails
				}
				done <- err
			}()
			if code := readClose(t, br); code != tc.code {
				t.Fatalf("close %d, want %d", code, tc.code)
			}
			_, _ = c.Write([]byte{0x88, 0x82, 0, 0, 0, 0, byte(tc.code >> 8), byte(tc.code)}) // the close handshake's answer
			err := <-done
			if err == nil {
				t.Fatal("Read returned no error")
			}
			if code, _ := a.o.CloseCode(); code != tc.code {
				t.Fatalf("the owner was told %d, want %d", code, tc.code)
			}
			if code := Status(err); tc.atRead && code != tc.code {
				t.Fatalf("Status(%v) = %d", err, code)
			}
		})
	}
}

// A transport with nothing buffered parks (where readers park): resume runs once the peer
// sends, and again as the connection begins to close; after that it reads as usual.
func TestTransportParks(t *testing.T) {
	s := newTestServer(t, nil)
	ws, a := s.dial(t, "")
	resumed := make(chan struct{}, 1)
	resume := func() { resumed <- struct{}{} }
	if !a.t.pc.Pollable() {
		if a.t.Park(resume) {
			t.Fatal("parked without a poller")
		}
		t.Skip("readers park on Linux only, and not in a build with -tags nopark")
	}
	waitResumed := func(what string) {
		t.Helper()
		select {
		case <-resumed:
		case <-time.After(10 * time.Second):
			t.Fatalf("not resumed %s", what)
		}
	}
	if !a.t.Park(resume) {
		t.Fatal("an idle transport did not park")
	}
	select {
	case <-resumed:
		t.Fatal("resumed before the peer sent anything")
	case <-time.After(50 * time.Millisecond):
	}
	if err := ws.Write(context.Background(), websocket.MessageText, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	waitResumed("as the peer sent")
	if got, err := a.t.Read(context.Background()); err != nil || string(got) != "hi" {
		t.Fatalf("read %q, %v", got, err)
	}
	if !a.t.Park(resume) {
		t.Fatal("did not park again")
	}
	a.t.BeginClose()
	waitResumed("as the connection closes")
	if a.t.Park(resume) {
		t.Fatal("parked while closing")
	}
}

// readLoops counts the goroutines reading an rpc connection.
func readLoops() int {
	buf := make([]byte, 1<<20)
	return bytes.Count(buf[:runtime.Stack(buf, true)], []byte("rpc.(*Conn).readLoop("))
}

// An rpc.Conn over a Transport, the way a session runs one: requests are answered while the
// server sends notifications (written by the sender when the writer is idle, else by the
// writer, in corked batches), which arrive whole and in order; the idle reader parks where
// readers park and the next request resumes it; the peer's close ends the connection.
func TestTransportCarriesAnRPCConn(t *testing.T) {
	s := newTestServer(t, nil)
	ws, a := s.dial(t, "")
	workers := rpc.NewWorkers()
	defer workers.Close()
	conn := rpc.NewConn(a.t, codec.JSON, &rpc.Options{Workers: workers,
		Handler: rpc.HandlerFunc(func(_ context.Context, req *rpc.Request) (any, error) { return json.RawMessage(req.Params), nil })})
	conn.Start(context.Background())
	defer conn.Close()

	const requests, notes = 20, 300
	go func() {
		for i := range notes {
			frame, _ := codec.JSON.Encode(nil, &codec.Message{Method: "note", Params: []byte(fmt.Sprintf("[%d]", i))})
			for !conn.TrySend(frame, nil) {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for i := range requests {
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"echo","params":[%d]}`, i, i)
		if err := ws.Write(context.Background(), websocket.MessageText, []byte(req)); err != nil {
			t.Fatal(err)
		}
	}
	answered, noted := 0, 0
	for answered < requests || noted < notes {
		m := readMessage(t, ws)
		switch {
		case m.Method == "note":
			if string(m.Params) != fmt.Sprintf("[%d]", noted) {
				t.Fatalf("notification %s, want %d", m.Params, noted)
			}
			noted++
		case m.IsResponse():
			if string(m.Result) != fmt.Sprintf("[%d]", m.ID) {
				t.Fatalf("response %d: %s", m.ID, m.Result)
			}
			answered++
		}
	}

	parks := a.t.pc.Pollable()
	deadline := time.Now().Add(10 * time.Second)
	for (readLoops() == 0) != parks {
		if time.Now().After(deadline) {
			t.Fatalf("an idle connection has %d readers; parking %v", readLoops(), parks)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":99,"method":"echo","params":[99]}`)); err != nil {
		t.Fatal(err)
	}
	if m := readMessage(t, ws); m.ID != 99 || string(m.Result) != "[99]" {
		t.Fatalf("after the idle time: %+v", m)
	}

	_ = ws.Close(websocket.StatusNormalClosure, "")
	select {
	case <-conn.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the peer's close did not end the connection")
	}
	if code := Status(conn.Err()); code != websocket.StatusNormalClosure {
		t.Fatalf("ended with %v: close %d", conn.Err(), code)
	}
}

// readMessage reads one JSON-RPC message from ws.
func readMessage(t *testing.T, ws *websocket.Conn) *codec.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, data, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var m codec.Message
	if err := codec.JSON.Decode(data, &m); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return &m
}
