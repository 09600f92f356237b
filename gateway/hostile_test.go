package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// Params of the wrong shape are answered in the protocol's words, the same
// in both codecs, without Go type names.
func TestParamsErrorsInProtocolWords(t *testing.T) {
	env := gatewaytest.Start(t, nil)
	env.Project(t, "WEB", "alice", "viewer")
	forEachCodec(t, func(t *testing.T, c codec.Codec) {
		t.Run("before auth", func(t *testing.T) {
			for _, tc := range []struct {
				params any
				msg    string
			}{
				{map[string]any{"token": 5}, "params.token must be a string"},
				{[]any{"a token"}, "params must be an object"},
			} {
				k := dial(t, env.URL, c)
				e := k.wantError("auth", tc.params, -32602)
				checkWords(t, e.Message, tc.msg)
				if code := k.waitClose(5 * time.Second); code != gateway.StatusUnauthenticated {
					t.Fatalf("close %d, want 4001", code)
				}
			}
		})
		k := login(t, env, c, "alice")
		for _, tc := range []struct {
			method string
			params any
			msg    string
		}{
			{"stream.subscribe", map[string]any{"subscription": 5, "stream": "project:WEB"}, "params.subscription must be a string"},
			{"stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:WEB", "from_seq": "0"}, "params.from_seq must be an integer"},
			{"stream.subscribe", map[string]any{"subscription": "s1", "stream": "project:WEB", "from_seq": 1.5}, "params.from_seq must be an integer"},
			{"stream.subscribe", map[string]any{"subscription": "s1", "stream": []any{"project:WEB"}}, "params.stream must be a string"},
			{"stream.unsubscribe", []any{"s1"}, "params must be an object"},
			{"auth.refresh", map[string]any{"token": true}, "params.token must be a string"},
		} {
			e := k.wantError(tc.method, tc.params, -32602)
			checkWords(t, tc.method+": "+e.Message, tc.method+": "+tc.msg)
		}
		k.mustCall("system.ping", nil, nil) // the connection goes on
	})
}

func checkWords(t *testing.T, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	for _, w := range []string{"Go ", "of type", "json:", "msgpack", "unmarshal", "int64", "gateway.", "Params"} {
		if strings.Contains(got, w) {
			t.Errorf("message %q names Go internals (%q)", got, w)
		}
	}
}

// A text frame that is not UTF-8 fails the connection with 1007 (RFC 6455
// §8.1), before auth and after it, and the close is counted under 1007.
func TestInvalidUTF8Closes1007(t *testing.T) {
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{DrainWindow: 10 * time.Millisecond}})
	bad := func(id int, method, params string) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
	}
	for _, tc := range []struct {
		name  string
		login bool
		frame []byte
	}{
		{"before auth", false, bad(1, "auth", "{\"token\":\"a\xff\xfeb\"}")},
		{"after auth", true, bad(2, "system.ping", "{\"pad\":\"\xff\xfe\"}")},
		{"after auth, in a key", true, bad(3, "system.ping", "{\"\xfe\":1}")},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			var k *wsClient
			if tc.login {
				k = login(t, env, codec.JSON, "alice")
			} else {
				k = dial(t, env.URL, codec.JSON)
			}
			if err := k.ws.Write(context.Background(), websocket.MessageText, tc.frame); err != nil {
				t.Fatal(err)
			}
			if m, err := k.next(5 * time.Second); err == nil {
				t.Fatalf("got %+v %+v, want no reply", m, m.Error)
			}
			if code := k.waitClose(5 * time.Second); code != websocket.StatusInvalidFramePayloadData {
				t.Fatalf("close %d (%v), want 1007", code, k.err)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for closesWithCode(t, env.Server, "1007") != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("closes_total{code=\"1007\"} = %v, want 3", closesWithCode(t, env.Server, "1007"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Valid UTF-8 beyond ASCII goes through, in both codecs.
	for _, c := range codecs {
		k := login(t, env, c, "alice")
		k.mustCall("system.ping", map[string]string{"pad": "żółw 🐢"}, nil)
	}
}

func closesWithCode(t *testing.T, srv *gateway.Server, code string) float64 {
	t.Helper()
	v, _ := labeledMetric(t, srv, "ballet_gateway_closes_total", "code", code)
	return v
}
