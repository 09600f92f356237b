package streams_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ballet/gateway/streams"
)

func TestParseStream(t *testing.T) {
	long := strings.Repeat("A", streams.MaxStreamKey)
	for _, tc := range []struct {
		in      string
		kind    streams.StreamKind
		key     string
		project string
	}{
		{"project:WEB", streams.StreamProject, "WEB", "WEB"},
		{"item:WEB-42", streams.StreamItem, "WEB-42", "WEB"},
		{"item:MY-PROJ-7", streams.StreamItem, "MY-PROJ-7", "MY-PROJ"},
		{"item:NOHYPHEN", streams.StreamItem, "NOHYPHEN", ""},
		{"item:-1", streams.StreamItem, "-1", ""},
		{"project:" + long, streams.StreamProject, long, long},
		{"project:a:b", streams.StreamProject, "a:b", "a:b"},
		{"project:ünï", streams.StreamProject, "ünï", "ünï"},
	} {
		s, err := streams.ParseStream(tc.in)
		if err != nil {
			t.Errorf("ParseStream(%q) = %v", tc.in, err)
			continue
		}
		if s.Kind != tc.kind || s.Key != tc.key || s.Project() != tc.project || s.String() != tc.in {
			t.Errorf("ParseStream(%q) = %+v (project %q, string %q)", tc.in, s, s.Project(), s.String())
		}
	}
	for _, in := range []string{
		"", "project", "project:", "item:", ":WEB", "projects:WEB", "Project:WEB", "planner:WEB",
		"project:WEB 1", "project: WEB", "project:WEB\n", "project:WEB\t", "item:WEB\x00", "item:WEB\x7f",
		"project:WEB\u00a0", "project:WEB\u2028", "project:\xff", "project:" + strings.Repeat("A", streams.MaxStreamKey+1),
	} {
		if s, err := streams.ParseStream(in); !errors.Is(err, streams.ErrBadStream) {
			t.Errorf("ParseStream(%q) = %+v, %v; want ErrBadStream", in, s, err)
		}
	}
}

func TestStreamMatches(t *testing.T) {
	e := &streams.Event{ProjectKey: "WEB", EntityType: "item", EntityKey: "WEB-1"}
	c := &streams.Event{ProjectKey: "WEB", EntityType: "comment", EntityKey: "WEB-1"}
	for _, tc := range []struct {
		s    streams.Stream
		e    *streams.Event
		want bool
	}{
		{streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, e, true},
		{streams.Stream{Kind: streams.StreamProject, Key: "API"}, e, false},
		{streams.Stream{Kind: streams.StreamItem, Key: "WEB-1"}, e, true},
		{streams.Stream{Kind: streams.StreamItem, Key: "WEB-2"}, e, false},
		{streams.Stream{Kind: streams.StreamItem, Key: "WEB-1"}, c, false},
		{streams.Stream{Kind: streams.StreamProject, Key: "WEB"}, c, true},
		{streams.Stream{}, e, false},
	} {
		if got := tc.s.Matches(tc.e); got != tc.want {
			t.Errorf("%v.Matches(%+v) = %v", tc.s, tc.e, got)
		}
	}
}

func FuzzParseStream(f *testing.F) {
	for _, s := range []string{"project:WEB", "item:WEB-42", "item:", "project:a b", "x:y", "project:\xff", "item:A-B-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := streams.ParseStream(in)
		if err != nil {
			if !errors.Is(err, streams.ErrBadStream) {
				t.Fatalf("error %v does not wrap ErrBadStream", err)
			}
			return
		}
		if s.String() != in {
			t.Fatalf("String() = %q, parsed from %q", s.String(), in)
		}
		if s.Key == "" || len(s.Key) > streams.MaxStreamKey || !utf8.ValidString(s.Key) {
			t.Fatalf("accepted key %q", s.Key)
		}
		for _, r := range s.Key {
			if unicode.IsSpace(r) || unicode.IsControl(r) {
				t.Fatalf("accepted key %q with %U", s.Key, r)
			}
		}
		if p := s.Project(); p != "" && !strings.HasPrefix(s.Key, p) {
			t.Fatalf("Project() = %q of key %q", p, s.Key)
		}
		again, err := streams.ParseStream(s.String())
		if err != nil || again != s {
			t.Fatalf("round trip %+v → %+v, %v", s, again, err)
		}
	})
}

func TestNewEventValidate(t *testing.T) {
	ok := []string{``, `{}`, `null`, `{"a":"\\u0000"}`, `"\ud83d\ude00"`, `"\\\\"`, `["\u00e9", "\uD83D\uDE00x"]`}
	for _, p := range ok {
		e := streams.NewEvent{ProjectKey: "WEB", Payload: []byte(p)}
		if err := e.Validate(); err != nil {
			t.Errorf("payload %s: %v", p, err)
		}
	}
	bad := []string{`{`, `{} {}`, `"\u0000"`, `"a\u0000b"`, `"\\\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800x"`, `"\ud800\u0041"`, `"\ud800\ud800"`, "\"\xff\""}
	for _, p := range bad {
		e := streams.NewEvent{ProjectKey: "WEB", Payload: []byte(p)}
		if err := e.Validate(); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("payload %s: %v, want ErrInvalid", p, err)
		}
	}
	for _, e := range []streams.NewEvent{{ProjectKey: "W\x00"}, {Type: "\xff"}, {EntityKey: "a\x00"}, {ActorSubject: "\xc3"}} {
		if err := e.Validate(); !errors.Is(err, streams.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", e, err)
		}
	}
}

func TestValidProjectKeyAndRole(t *testing.T) {
	for key, want := range map[string]bool{
		"W": true, "WEB": true, "A1": true, "ABCDEFGHIJKLMNOPQRST": true,
		"": false, "web": false, "1A": false, "A-B": false, "ABCDEFGHIJKLMNOPQRSTU": false, "WEB\n": false, "ÄB": false,
	} {
		if got := streams.ValidProjectKey(key); got != want {
			t.Errorf("ValidProjectKey(%q) = %v", key, got)
		}
	}
	for role, want := range map[string]bool{"viewer": true, "member": true, "admin": true, "owner": false, "": false, "Admin": false} {
		if got := streams.ValidRole(role); got != want {
			t.Errorf("ValidRole(%q) = %v", role, got)
		}
	}
}
