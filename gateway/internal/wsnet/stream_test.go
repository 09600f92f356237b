package wsnet

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/rpc"
)

// streamed serves one streamed response per request on a test server and hands its Transport
// to the test, with the options o.
func streamed(t *testing.T, o StreamOptions) (string, <-chan *Transport) {
	t.Helper()
	u := NewUpgrader(nil)
	ts := make(chan *Transport, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		opts := o
		opts.Request = body
		tr, err := u.Stream(w, r, &opts)
		if err != nil {
			t.Errorf("Stream: %v", err)
			return
		}
		tr.Attach(nopOwner{}, false, 1<<20)
		ts <- tr
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ts
}

type nopOwner struct{}

func (nopOwner) CloseWith(websocket.StatusCode, string)    {}
func (nopOwner) CloseCode() (websocket.StatusCode, string) { return 0, "" }
func (nopOwner) Pinged(context.Context, []byte) bool       { return false }
func (nopOwner) Framed()                                   {}

// rawPost sends a POST of body in HTTP/1.x version v over a socket of its own and returns it
// with a reader of what comes back.
func rawPost(t *testing.T, url, v, body string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_, _ = io.WriteString(c, "POST /rpc HTTP/"+v+"\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// The response's bytes, to the letter: each message a chunk of one line (or one event), the
// end's message, the last chunk; HTTP/1.0 gets no chunks and ends with the socket.
func TestStreamFraming(t *testing.T) {
	for _, tc := range []struct {
		name, version string
		sse           bool
		want          string
	}{
		{"ndjson", "1.1", false, "8\r\n{\"a\":1}\n\r\n3\r\n{}\n\r\n6\r\n\"end\"\n\r\n0\r\n\r\n"},
		{"sse", "1.1", true, "f\r\ndata: {\"a\":1}\n\n\r\na\r\ndata: {}\n\n\r\nd\r\ndata: \"end\"\n\n\r\n0\r\n\r\n"},
		{"http/1.0", "1.0", false, "{\"a\":1}\n{}\n\"end\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, ts := streamed(t, StreamOptions{SSE: tc.sse, End: func(code websocket.StatusCode, _ string) []byte {
				if code != websocket.StatusGoingAway {
					t.Errorf("end with %d", code)
				}
				return []byte(`"end"`)
			}})
			_, br := rawPost(t, url, tc.version, `{"req":1}`)
			tr := <-ts
			if m, err := tr.Read(context.Background()); err != nil || string(m) != `{"req":1}` {
				t.Fatalf("first Read: %q, %v", m, err)
			}
			if err := tr.Write(context.Background(), []byte(`{"a":1}`)); err != nil {
				t.Fatal(err)
			}
			if err := tr.WriteFrames([]rpc.Out{{Head: []byte("{"), Tail: []byte("}")}}); err != nil {
				t.Fatal(err)
			}
			if err := tr.Drain(); err != nil {
				t.Fatal(err)
			}
			if err := tr.CloseHandshake(websocket.StatusGoingAway, "bye"); err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(br) // the server closes the socket after the response
			head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
			if chunked := strings.Contains(head, "\r\nTransfer-Encoding: chunked"); chunked != (tc.version == "1.1") ||
				!strings.Contains(head, "\r\nConnection: close") || !strings.HasPrefix(head, "HTTP/"+tc.version+" 200 OK") {
				t.Fatalf("header %q", head)
			}
			if body != tc.want {
				t.Fatalf("body %q\nwant %q", body, tc.want)
			}
		})
	}
}

// After its request, anything the client sends, or its going away, ends the reading.
func TestStreamReadEndsWithTheClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		act  func(net.Conn)
		want error
	}{
		{"more bytes", func(c net.Conn) { _, _ = c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) }, errStreamRead},
		{"gone", func(c net.Conn) { _ = c.Close() }, nil}, // EOF, or a reset: it had not read the header
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, ts := streamed(t, StreamOptions{})
			c, _ := rawPost(t, url, "1.1", `{}`)
			tr := <-ts
			defer tr.Abort()
			if _, err := tr.Read(context.Background()); err != nil {
				t.Fatal(err)
			}
			tc.act(c)
			if _, err := tr.Read(context.Background()); err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("second Read: %v, want %v", err, tc.want)
			}
		})
	}
}
