package wsnet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The opening handshake answers a WebSocket request 101 with the key's accept value and the
// first of the server's subprotocols that the client offers, and refuses the rest with the
// status RFC 6455 §4.2.1 and §4.4 give them, and the header that says what would do.
func TestHandshake(t *testing.T) {
	good := func(r *http.Request) {
		r.Header.Set("Upgrade", "websocket")
		r.Header.Set("Connection", "keep-alive, Upgrade")
		r.Header.Set("Sec-WebSocket-Version", "13")
		r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	}
	ours := []string{"ballet.v1.msgpack", "ballet.v1.json"}
	for _, tc := range []struct {
		name    string
		method  string
		change  func(r *http.Request)
		status  int
		header  string // a header the answer must have, "Name: value"
		origins []string
	}{
		{"the RFC's example", "GET", nil, 101, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", nil},
		{"both subprotocols: ours first", "GET", func(r *http.Request) {
			r.Header.Set("Sec-WebSocket-Protocol", "ballet.v1.json, Ballet.V1.MsgPack")
		}, 101, "Sec-WebSocket-Protocol: Ballet.V1.MsgPack", nil},
		{"an extension offered is not taken", "GET", func(r *http.Request) {
			r.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate")
		}, 101, "Sec-WebSocket-Extensions: ", nil},
		{"no Upgrade in Connection", "GET", func(r *http.Request) { r.Header.Set("Connection", "keep-alive") }, 426, "Upgrade: websocket", nil},
		{"no websocket in Upgrade", "GET", func(r *http.Request) { r.Header.Set("Upgrade", "h2c") }, 426, "Connection: Upgrade", nil},
		{"a POST", "POST", nil, 405, "", nil},
		{"version 12", "GET", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Version", "12") }, 400, "Sec-WebSocket-Version: 13", nil},
		{"two versions", "GET", func(r *http.Request) { r.Header.Add("Sec-WebSocket-Version", "13") }, 400, "Sec-WebSocket-Version: 13", nil},
		{"a body", "GET", func(r *http.Request) {
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("hello")), 5
		}, 400, "", nil},
		{"no key", "GET", func(r *http.Request) { r.Header.Del("Sec-WebSocket-Key") }, 400, "", nil},
		{"two keys", "GET", func(r *http.Request) { r.Header.Add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==") }, 400, "", nil},
		{"a key of 15 bytes", "GET", func(r *http.Request) { r.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25j") }, 400, "", nil},
		{"its own origin", "GET", func(r *http.Request) { r.Header.Set("Origin", "https://"+r.Host) }, 101, "", nil},
		{"a foreign origin", "GET", func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") }, 403, "", []string{"*.board.example"}},
		{"an origin matching a pattern", "GET", func(r *http.Request) { r.Header.Set("Origin", "https://Web.Board.Example") }, 101, "", []string{"*.board.example"}},
		{"a scheme pattern", "GET", func(r *http.Request) { r.Header.Set("Origin", "http://web.board.example") }, 403, "", []string{"https://*.board.example"}},
		{"an origin without a host", "GET", func(r *http.Request) { r.Header.Set("Origin", "null") }, 403, "", []string{"*.board.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			accepted := make(chan bool, 1)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tr, err := NewUpgrader(nil).Accept(w, r, &AcceptOptions{Subprotocols: ours, OriginPatterns: tc.origins})
				if err == nil {
					tr.Abort()
				}
				accepted <- err == nil
			}))
			defer hs.Close()
			r, _ := http.NewRequest(tc.method, hs.URL, nil)
			good(r)
			if tc.change != nil {
				tc.change(r)
			}
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if ok := <-accepted; (tc.status == 101) != ok {
				t.Fatalf("status %d, and Accept returned a transport: %v", resp.StatusCode, ok)
			}
			if name, value, ok := strings.Cut(tc.header, ": "); ok && resp.Header.Get(name) != value {
				t.Fatalf("%s: %q, want %q", name, resp.Header.Get(name), value)
			}
		})
	}
}
