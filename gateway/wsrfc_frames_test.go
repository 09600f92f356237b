package gateway_test

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
	"github.com/ballet/gateway/gateway/internal/wsnet"
)

// part is a masked client frame with the FIN bit as given.
func part(opcode byte, fin bool, payload string) []byte {
	f := clientFrame(opcode, []byte(payload))
	if !fin {
		f[0] &^= 0x80
	}
	return f
}

// closePayload is a close frame's payload: code, then reason.
func closePayload(code uint16, reason string) string {
	return string(binary.BigEndian.AppendUint16(nil, code)) + reason
}

// rfcOpen upgrades /rpc with subprotocol proto and, when login, authenticates as alice.
func rfcOpen(t *testing.T, env *gatewaytest.Env, proto string, login bool) *hostile {
	t.Helper()
	h, resp := handshake(t, env, "GET", map[string]string{"Sec-WebSocket-Protocol": proto})
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	if login {
		h.send(t, textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))))
		h.wantResult(t, 1)
	}
	return h
}

// wantResult reads the server's next frame, which must be the text frame of a successful
// JSON-RPC response to id.
func (h *hostile) wantResult(t *testing.T, id int) {
	t.Helper()
	f := h.frame(t, 10*time.Second)
	if f.opcode() != 1 || !strings.Contains(string(f.payload), fmt.Sprintf(`"id":%d,`, id)) ||
		strings.Contains(string(f.payload), `"error"`) {
		t.Fatalf("frame opcode %d %.300q, want the result of request %d", f.opcode(), f.payload, id)
	}
}

// wantPong reads the server's next frame, which must be a pong with payload p.
func (h *hostile) wantPong(t *testing.T, p string) {
	t.Helper()
	if f := h.frame(t, 10*time.Second); f.opcode() != 10 || string(f.payload) != p {
		t.Fatalf("frame opcode %d %q, want a pong %q", f.opcode(), f.payload, p)
	}
}

func pingRequest(id int, pad string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"system.ping","params":{"pad":"%s"}}`, id, pad)
}

// Data and control frames (RFC 6455 §5): pings are answered with their payload and pongs
// ignored; fragmented messages are reassembled around control frames; a frame the RFC
// forbids fails the connection with its close code, after which the server closes TCP.
func TestRFC6455Frames(t *testing.T) {
	const limit = 16 << 10
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{ReadLimit: limit}})

	t.Run("answered", func(t *testing.T) {
		t.Run("a ping before auth", func(t *testing.T) {
			h := rfcOpen(t, env, "ballet.v1.json", false)
			h.send(t, clientFrame(9, []byte("before auth")))
			h.wantPong(t, "before auth")
		})
		t.Run("a ping after auth", func(t *testing.T) {
			h := rfcOpen(t, env, "ballet.v1.json", true)
			h.send(t, clientFrame(9, []byte(strings.Repeat("p", 125))))
			h.wantPong(t, strings.Repeat("p", 125))
			h.send(t, clientFrame(9, nil))
			h.wantPong(t, "")
		})
		t.Run("an unsolicited pong", func(t *testing.T) {
			h := rfcOpen(t, env, "ballet.v1.json", false)
			h.send(t, clientFrame(10, []byte("unsolicited")))
			h.send(t, textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))))
			h.wantResult(t, 1)
		})
		t.Run("three fragments around a ping", func(t *testing.T) {
			h := rfcOpen(t, env, "ballet.v1.json", true)
			r := pingRequest(7, "fragments")
			h.send(t, part(1, false, r[:10]), clientFrame(9, []byte("between")), part(0, false, r[10:30]), part(0, true, r[30:]))
			h.wantPong(t, "between")
			h.wantResult(t, 7)
		})
		t.Run("a character split over two fragments", func(t *testing.T) {
			h := rfcOpen(t, env, "ballet.v1.json", true)
			r := pingRequest(8, "żółw")
			cut := strings.Index(r, "ż") + 1 // inside the two bytes of ż
			h.send(t, part(1, false, r[:cut]), part(0, true, r[cut:]))
			h.wantResult(t, 8)
		})
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			proto string
			login bool
			send  []byte
			want  int
		}{
			{"RSV1", "ballet.v1.json", false, rsv(0x40, textFrame(pingRequest(2, ""))), 1002},
			{"RSV2", "ballet.v1.json", true, rsv(0x20, textFrame(pingRequest(2, ""))), 1002},
			{"RSV3", "ballet.v1.json", true, rsv(0x10, clientFrame(9, []byte("x"))), 1002},
			{"opcode 3", "ballet.v1.json", false, clientFrame(3, []byte("x")), 1002},
			{"opcode 0xB", "ballet.v1.json", true, clientFrame(0xb, []byte("x")), 1002},
			{"a fragmented ping", "ballet.v1.json", false, part(9, false, "x"), 1002},
			{"a ping of 126 bytes", "ballet.v1.json", true, clientFrame(9, []byte(strings.Repeat("p", 126))), 1002},
			{"a continuation starting nothing", "ballet.v1.json", false, part(0, true, pingRequest(2, "")), 1002},
			{"a text frame inside a fragmented message", "ballet.v1.json", true,
				append(part(1, false, `{"jsonrpc":`), textFrame(pingRequest(2, ""))...), 1002},
			{"a binary frame inside a fragmented message", "ballet.v1.msgpack", false,
				append(part(2, false, "\x81"), clientFrame(2, []byte("\x80"))...), 1002},
			{"invalid UTF-8", "ballet.v1.json", true, textFrame(pingRequest(2, "\xc3\x28")), 1007},
			{"UTF-8 cut at the message's end", "ballet.v1.json", true,
				append(part(1, false, pingRequest(2, "x")+" \xc5"), part(0, true, "")...), 1007},
			{"binary on the JSON subprotocol", "ballet.v1.json", false, clientFrame(2, []byte(pingRequest(2, ""))), 1003},
			{"binary on the JSON subprotocol, after auth", "ballet.v1.json", true, clientFrame(2, []byte(pingRequest(2, ""))), 1003},
			{"text on the MessagePack subprotocol", "ballet.v1.msgpack", false, textFrame(pingRequest(2, "")), 1003},
			{"a 16-bit length over the read limit", "ballet.v1.json", false, frameHeader(1, true, limit+1), 1009},
			{"a 64-bit length over the read limit", "ballet.v1.msgpack", false, frameHeader(2, true, 1<<16), 1009},
			{"an unmasked ping", "ballet.v1.json", false, []byte{0x89, 0x01, 'x'}, 1002},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := rfcOpen(t, env, tc.proto, tc.login)
				h.send(t, tc.send)
				h.wantClose(t, tc.want)
			})
		}
	})
}

// rsv sets RSV bits in a frame's first byte.
func rsv(bits byte, f []byte) []byte {
	f[0] |= bits
	return f
}

// The closing handshake (RFC 6455 §5.5.1, §7): a client's valid close frame is echoed with
// its code and the server closes TCP at once; an invalid one fails the connection with
// 1002; what the client sends after its close frame is not answered.
func TestRFC6455ClientClose(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	t.Run("echoed", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			payload string
			want    int // 1005: no code
		}{
			{"1000 bye", closePayload(1000, "bye"), 1000},
			{"no payload", "", 1005},
			{"1001", closePayload(1001, ""), 1001},
			{"3000", closePayload(3000, "application"), 3000},
			{"4999", closePayload(4999, "private"), 4999},
			{"a reason of 123 bytes", closePayload(1000, strings.Repeat("r", 123)), 1000},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				for _, login := range []bool{false, true} {
					h := rfcOpen(t, env, "ballet.v1.json", login)
					h.send(t, clientFrame(8, []byte(tc.payload)))
					f := h.frame(t, 10*time.Second)
					// An empty close frame is answered with an empty one (1005 is never sent).
					if f.opcode() != 8 || f.closeCode() != tc.want || tc.want == 1005 && len(f.payload) != 0 {
						t.Fatalf("login %v: frame opcode %d %q, want a close with %d", login, f.opcode(), f.payload, tc.want)
					}
					// Both close frames are sent: the server closes TCP first, without waiting out
					// the close grace.
					start := time.Now()
					if err := h.eof(closeBound); err != nil {
						t.Fatalf("login %v: %v", login, err)
					}
					if d := time.Since(start); d >= wsnet.CloseGrace {
						t.Errorf("login %v: TCP closed %v after the echo, want before the close grace", login, d)
					}
				}
			})
		}
	})

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			payload string
		}{
			{"a payload of 1 byte", "\x03"},
			{"999", closePayload(999, "")},
			{"1004", closePayload(1004, "")},
			{"1005", closePayload(1005, "")},
			{"1006", closePayload(1006, "")},
			{"1015", closePayload(1015, "")},
			{"1016", closePayload(1016, "")},
			{"5000", closePayload(5000, "")},
			{"a fragmented close", string([]byte{0x03, 0xe8})},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := rfcOpen(t, env, "ballet.v1.json", false)
				f := clientFrame(8, []byte(tc.payload))
				if tc.name == "a fragmented close" {
					f[0] &^= 0x80
				}
				h.send(t, f)
				h.wantClose(t, 1002)
			})
		}
	})

	// A close reason must be UTF-8 (RFC 6455 §5.5.1, §8.1).
	t.Run("a reason that is not UTF-8", func(t *testing.T) {
		for _, reason := range []string{"\xff\xfe", "caf\xc3"} {
			h := rfcOpen(t, env, "ballet.v1.json", false)
			h.send(t, clientFrame(8, []byte(closePayload(1000, reason))))
			h.wantClose(t, 1007)
		}
	})

	// Requests and pings after the client's close frame, in the same write and in the next,
	// are not answered: the echo is all that comes before the end of TCP.
	t.Run("frames after the close frame", func(t *testing.T) {
		for _, login := range []bool{false, true} {
			h := rfcOpen(t, env, "ballet.v1.json", login)
			h.send(t, append(clientFrame(8, []byte(closePayload(1000, ""))), textFrame(pingRequest(5, ""))...))
			// The server may have answered the close and closed already: this write may then
			// meet a reset, which is no failure; what matters is what is read.
			_, _ = h.c.Write(append(clientFrame(9, []byte("after")), textFrame(pingRequest(6, ""))...))
			h.wantClose(t, 1000)
		}
	})
}

// A close the server starts (RFC 6455 §7.1.1): after its close frame, a client that
// answers with its own has TCP closed at once; one that never answers has it closed after
// the close grace (2 s).
func TestRFC6455ServerClose(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AuthTimeout: 300 * time.Millisecond}})
	type closeCase struct {
		name  string
		send  []byte // what makes the server close 4001; nothing: the auth timeout
		reply bool
		bound time.Duration
	}
	// Each waits out the close grace, or the auth timeout and the close grace: at once.
	togetherCases(t, []closeCase{
		{"the auth timeout, answered", nil, true, wsnet.CloseGrace},
		{"the auth timeout, not answered", nil, false, closeBound},
		{"an invalid token, answered", textFrame(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"bad"}}`), true, wsnet.CloseGrace},
		{"an invalid token, not answered", textFrame(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"bad"}}`), false, closeBound},
		{"a first request that is not auth, not answered", textFrame(pingRequest(1, "")), false, closeBound},
	}, func(tc closeCase) string { return tc.name }, func(t *testing.T, tc closeCase) {
		h := rfcOpen(t, env, "ballet.v1.json", false)
		if tc.send != nil {
			h.send(t, tc.send)
		}
		f := h.frame(t, 10*time.Second)
		if f.opcode() == 1 { // the error response to the request, first
			f = h.frame(t, 10*time.Second)
		}
		if f.opcode() != 8 || f.closeCode() != int(gateway.StatusUnauthenticated) {
			t.Fatalf("frame opcode %d %q, want a close with 4001", f.opcode(), f.payload)
		}
		start := time.Now()
		if tc.reply {
			h.send(t, clientFrame(8, f.payload))
		}
		if err := h.eof(tc.bound); err != nil {
			t.Fatal(err)
		}
		t.Logf("TCP closed %v after the server's close frame", time.Since(start))
	})
}
