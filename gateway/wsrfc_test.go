package gateway_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ballet/gateway/gateway/gatewaytest"
)

// The RFC 6455 conformance of /rpc, as a client sees it on a raw socket: status lines and
// headers, frames byte by byte, close codes and when the server closes TCP. Nothing here
// reads the server's internals, so that the tests hold whatever implements the WebSocket.

// wireFrame is one frame as the server sent it.
type wireFrame struct {
	b0, b1  byte // the first two header bytes: FIN, RSV1-3 and opcode; MASK and length
	payload []byte
}

func (f wireFrame) opcode() byte { return f.b0 & 0x0f }

// closeCode is the code of a close frame's payload, 1005 when it has none.
func (f wireFrame) closeCode() int {
	if len(f.payload) < 2 {
		return 1005
	}
	return int(binary.BigEndian.Uint16(f.payload))
}

// readWireFrame reads one frame of the server's, unmasking it should it be masked.
func readWireFrame(br *bufio.Reader) (wireFrame, error) {
	var f wireFrame
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return f, err
	}
	f.b0, f.b1 = h[0], h[1]
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		if _, err := io.ReadFull(br, ext[:]); err != nil {
			return f, err
		}
		n = uint64(binary.BigEndian.Uint16(ext[:]))
	case 127:
		var ext [8]byte
		if _, err := io.ReadFull(br, ext[:]); err != nil {
			return f, err
		}
		n = binary.BigEndian.Uint64(ext[:])
	}
	var mask [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(br, mask[:]); err != nil {
			return f, err
		}
	}
	if n > 1<<24 {
		return f, fmt.Errorf("a server frame of %d bytes", n)
	}
	f.payload = make([]byte, n)
	if _, err := io.ReadFull(br, f.payload); err != nil {
		return f, err
	}
	if h[1]&0x80 != 0 {
		for i := range f.payload {
			f.payload[i] ^= mask[i%4]
		}
	}
	return f, nil
}

// frame reads the server's next frame within d. Every frame of the server's is unmasked
// (RFC 6455 §5.1), has no RSV bit without an extension, and is final: the gateway never
// fragments what it sends.
func (h *hostile) frame(t *testing.T, d time.Duration) wireFrame {
	t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	f, err := readWireFrame(h.br)
	if err != nil {
		t.Fatalf("no frame within %v: %v", d, err)
	}
	if f.b1&0x80 != 0 {
		t.Errorf("a masked server frame: % x", []byte{f.b0, f.b1})
	}
	if f.b0&0x80 == 0 || f.b0&0x70 != 0 {
		t.Errorf("server frame header % x: want FIN set and no RSV bit", []byte{f.b0, f.b1})
	}
	// A close frame's code is one that may be sent (§7.4), and its reason UTF-8 (§5.5.1).
	if f.opcode() == 8 && len(f.payload) >= 2 {
		if c := f.closeCode(); c < 1000 || c >= 5000 || c == 1004 || c == 1005 || c == 1006 || c >= 1015 && c < 3000 {
			t.Errorf("a close frame with code %d", c)
		}
		if !utf8.Valid(f.payload[2:]) {
			t.Errorf("a close reason that is not UTF-8: %q", f.payload[2:])
		}
	}
	return f
}

// closeBound is how long a server may take to close TCP once it has sent its close frame
// to a client that does not answer: the second its queued frames have to flush and the
// close grace (2 s), then a second for a loaded machine.
const closeBound = 4 * time.Second

// wantClose reads the server's next frame, which must be a close frame with code want
// (1005: no code), and then the end of the TCP stream within closeBound. It returns the
// close frame's reason.
func (h *hostile) wantClose(t *testing.T, want int) string {
	t.Helper()
	f := h.frame(t, 10*time.Second)
	if f.opcode() != 8 {
		t.Fatalf("frame opcode %d %q, want a close frame", f.opcode(), f.payload)
	}
	if got := f.closeCode(); got != want {
		t.Fatalf("close %d %q, want %d", got, f.payload, want)
	}
	if len(f.payload) == 1 || len(f.payload) > 125 {
		t.Fatalf("a close payload of %d bytes", len(f.payload))
	}
	if err := h.eof(closeBound); err != nil {
		t.Fatal(err)
	}
	if len(f.payload) < 2 {
		return ""
	}
	return string(f.payload[2:])
}

// eof waits for the server to close TCP within d: the read ends with EOF or a reset, and
// no frame comes before that.
func (h *hostile) eof(d time.Duration) error {
	_ = h.c.SetReadDeadline(time.Now().Add(d))
	defer h.c.SetReadDeadline(time.Time{})
	f, err := readWireFrame(h.br)
	switch {
	case err == nil:
		return fmt.Errorf("frame opcode %d %q after the close frame", f.opcode(), f.payload)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("a partial frame before the end: %w", err)
	case isTimeout(err):
		return fmt.Errorf("TCP still open %v after the close frame", d)
	}
	return nil // EOF or a reset
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// send writes b, failing the test if the write fails.
func (h *hostile) send(t *testing.T, b ...[]byte) {
	t.Helper()
	for _, p := range b {
		if _, err := h.c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
}

// wsHeaders are the header lines of a valid /rpc upgrade, in order, with the RFC's example key.
var wsHeaders = []string{
	"Upgrade: websocket",
	"Connection: Upgrade",
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
	"Sec-WebSocket-Version: 13",
	"Sec-WebSocket-Protocol: ballet.v1.json",
}

// handshake sends a request for /rpc with method and the header lines of wsHeaders, those
// named in set replaced by its value ("" drops the line), then add; and reads the answer.
func handshake(t *testing.T, env *gatewaytest.Env, method string, set map[string]string, add ...string) (*hostile, *http.Response) {
	t.Helper()
	h := hostileDial(t, env)
	var b strings.Builder
	fmt.Fprintf(&b, "%s /rpc HTTP/1.1\r\nHost: %s\r\n", method, h.c.RemoteAddr())
	for _, line := range wsHeaders {
		name, _, _ := strings.Cut(line, ":")
		if v, ok := set[name]; ok {
			if v != "" {
				fmt.Fprintf(&b, "%s: %s\r\n", name, v)
			}
			continue
		}
		b.WriteString(line + "\r\n")
	}
	for _, line := range add {
		b.WriteString(line + "\r\n")
	}
	b.WriteString("\r\n")
	h.send(t, []byte(b.String()))
	_ = h.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatalf("handshake: %v", err)
	}
	_ = h.c.SetReadDeadline(time.Time{})
	return h, resp
}

// The opening handshake (RFC 6455 §4.2): a valid request is switched with the key's accept
// value and the server's choice of the offered subprotocols, and no extension; an invalid
// one is refused with the status the RFC and net/http give it. (A refusal of a request with a
// body waits out the body's grace, and a connection without a subprotocol the close grace:
// the refusals and those connections run at once, each on a socket of its own.)
func TestRFC6455Handshake(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	u, _ := url.Parse(env.URL)
	t.Run("accepted", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			set   map[string]string
			add   []string
			proto string
		}{
			{"json", nil, nil, "ballet.v1.json"},
			{"msgpack", map[string]string{"Sec-WebSocket-Protocol": "ballet.v1.msgpack"}, nil, "ballet.v1.msgpack"},
			{"the server's order, msgpack first", map[string]string{"Sec-WebSocket-Protocol": "ballet.v1.json, ballet.v1.msgpack"}, nil, "ballet.v1.msgpack"},
			{"offers over two lines", nil, []string{"Sec-WebSocket-Protocol: ballet.v1.msgpack"}, "ballet.v1.msgpack"},
			{"an unknown offer first", map[string]string{"Sec-WebSocket-Protocol": "graphql-ws, ballet.v1.json"}, nil, "ballet.v1.json"},
			{"the client's case", map[string]string{"Sec-WebSocket-Protocol": "Ballet.V1.JSON"}, nil, "Ballet.V1.JSON"},
			{"permessage-deflate offered", nil, []string{"Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits"}, "ballet.v1.json"},
			{"tokens in other case", map[string]string{"Upgrade": "WebSocket", "Connection": "keep-alive, upgrade"}, nil, "ballet.v1.json"},
			{"the same origin", nil, []string{"Origin: http://" + u.Host}, "ballet.v1.json"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, resp := handshake(t, env, "GET", tc.set, tc.add...)
				if resp.StatusCode != http.StatusSwitchingProtocols {
					t.Fatalf("status %s, want 101", resp.Status)
				}
				for name, want := range map[string]string{
					"Sec-WebSocket-Accept":   "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=",
					"Upgrade":                "websocket",
					"Connection":             "Upgrade",
					"Sec-WebSocket-Protocol": tc.proto,
				} {
					if got := resp.Header.Values(name); len(got) != 1 || !strings.EqualFold(got[0], want) ||
						(name == "Sec-WebSocket-Accept" || name == "Sec-WebSocket-Protocol") && got[0] != want {
						t.Errorf("%s: %q, want %q", name, got, want)
					}
				}
				if got := resp.Header.Values("Sec-WebSocket-Extensions"); len(got) != 0 {
					t.Errorf("Sec-WebSocket-Extensions: %q, want none", got)
				}
			})
		}
	})

	type refusal struct {
		name   string
		method string
		set    map[string]string
		add    []string
		status int
		closes bool // the socket is closed after the answer, rather than kept alive (a refused handshake; the 405 is the router's)
	}
	refused := subtest{"refused", func(t *testing.T) {
		togetherCases(t, []refusal{
			{"no Upgrade", "GET", map[string]string{"Upgrade": ""}, nil, http.StatusUpgradeRequired, true},
			{"Upgrade: h2c", "GET", map[string]string{"Upgrade": "h2c"}, nil, http.StatusUpgradeRequired, true},
			{"no Connection", "GET", map[string]string{"Connection": ""}, nil, http.StatusUpgradeRequired, true},
			{"Connection: keep-alive", "GET", map[string]string{"Connection": "keep-alive"}, nil, http.StatusUpgradeRequired, true},
			{"PUT", "PUT", nil, []string{"Content-Length: 0"}, http.StatusMethodNotAllowed, false},
			{"version 12", "GET", map[string]string{"Sec-WebSocket-Version": "12"}, nil, http.StatusBadRequest, true},
			{"two versions", "GET", nil, []string{"Sec-WebSocket-Version: 13"}, http.StatusBadRequest, true},
			{"a body promised", "GET", nil, []string{"Content-Length: 100"}, http.StatusBadRequest, true},
			{"a chunked body", "GET", nil, []string{"Transfer-Encoding: chunked"}, http.StatusBadRequest, true},
			{"PUT with a body promised", "PUT", nil, []string{"Content-Length: 100"}, http.StatusMethodNotAllowed, true},
			{"no key", "GET", map[string]string{"Sec-WebSocket-Key": ""}, nil, http.StatusBadRequest, true},
			{"two keys", "GET", nil, []string{"Sec-WebSocket-Key: AQIDBAUGBwgJCgsMDQ4PEA=="}, http.StatusBadRequest, true},
			{"a key of 15 bytes", "GET", map[string]string{"Sec-WebSocket-Key": "AQIDBAUGBwgJCgsMDQ4P"}, nil, http.StatusBadRequest, true},
			{"a key of 17 bytes", "GET", map[string]string{"Sec-WebSocket-Key": "AQIDBAUGBwgJCgsMDQ4PEBE="}, nil, http.StatusBadRequest, true},
			{"a key not base64", "GET", map[string]string{"Sec-WebSocket-Key": "!!!!!!!!!!!!!!!!!!!!!!=="}, nil, http.StatusBadRequest, true},
			{"a foreign origin", "GET", nil, []string{"Origin: https://evil.example"}, http.StatusForbidden, true},
		}, func(tc refusal) string { return tc.name }, func(t *testing.T, tc refusal) {
			h, resp := handshake(t, env, tc.method, tc.set, tc.add...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %s, want %d", resp.Status, tc.status)
			}
			if got := resp.Header.Values("Sec-WebSocket-Accept"); len(got) != 0 {
				t.Errorf("a refusal with Sec-WebSocket-Accept %q", got)
			}
			// A 426 names the protocol to upgrade to (RFC 9110 §15.5.22).
			if got := resp.Header.Get("Upgrade"); tc.status == http.StatusUpgradeRequired && !strings.EqualFold(got, "websocket") {
				t.Errorf("426 with Upgrade %q, want websocket", got)
			}
			if tc.status == http.StatusBadRequest && strings.Contains(tc.name, "version") {
				if got := resp.Header.Values("Sec-WebSocket-Version"); len(got) != 1 || got[0] != "13" {
					t.Errorf("Sec-WebSocket-Version: %q, want 13", got)
				}
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			if tc.closes {
				if err := h.closedWithin(closeBound); err != nil {
					t.Error(err)
				}
			}
		})
	}}

	// No subprotocol of the gateway's offered: switched, then closed 1008 at once.
	noSubprotocol := subtest{"no subprotocol", func(t *testing.T) {
		togetherCases(t, []string{"", "graphql-ws"}, func(offer string) string { return "offer " + strconv.Quote(offer) }, func(t *testing.T, offer string) {
			h, resp := handshake(t, env, "GET", map[string]string{"Sec-WebSocket-Protocol": offer})
			if resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("status %s, want 101", resp.Status)
			}
			if got := resp.Header.Values("Sec-WebSocket-Protocol"); len(got) != 0 {
				t.Errorf("Sec-WebSocket-Protocol %q, want none", got)
			}
			h.wantClose(t, 1008)
		})
	}}
	together(t, refused, noSubprotocol)
}
