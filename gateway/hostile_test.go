package gateway_test

import (
	"strings"
	"testing"
	"time"

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
