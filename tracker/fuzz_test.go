package tracker

import (
	"strings"
	"testing"
	"time"
)

func TestParseIfMatch(t *testing.T) {
	v := func(n int64) *int64 { return &n }
	for _, c := range []struct {
		in   string
		want *int64
		err  bool
	}{
		{"", nil, false}, {"*", nil, false}, {" * ", nil, false},
		{`"3"`, v(3), false}, {`3`, v(3), false}, {`W/"3"`, v(3), false}, {` "12" `, v(12), false},
		{`"0"`, v(0), false}, {`"abc"`, v(-1), false}, {`W/"x1"`, v(-1), false}, {`""`, v(-1), false},
		{`"3`, nil, true}, {`3"`, nil, true}, {`W/3`, nil, true}, {`"1", "2"`, nil, true}, {`1, 2`, nil, true},
		{`abc`, nil, true}, {`-1`, nil, true}, {`+1`, nil, true}, {`"9999999999999999999"`, v(-1), false},
	} {
		got, err := ParseIfMatch(c.in)
		if (err != nil) != c.err || (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("ParseIfMatch(%q) = %v, %v; want %v, error %v", c.in, deref(got), err, deref(c.want), c.err)
		}
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func FuzzParseIfMatch(f *testing.F) {
	for _, s := range []string{"", "*", `"3"`, "3", `W/"3"`, `"abc"`, `"1", "2"`, `W/`, `"`, "W/\"\"", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseIfMatch(s)
		if err != nil {
			if v != nil {
				t.Fatalf("%q: version and error", s)
			}
			return
		}
		if v != nil && *v >= 0 {
			// The ETag the server sends for that version parses back to it.
			back, err := ParseIfMatch(etag(*v))
			if err != nil || back == nil || *back != *v {
				t.Fatalf("%q → %d, its etag %s → %v, %v", s, *v, etag(*v), back, err)
			}
		}
	})
}

func FuzzParseItemKey(f *testing.F) {
	for _, s := range []string{"WEB-1", "WEB-0", "WEB-01", "A1-999", "web-1", "-1", "WEB-", "WEB-1-2", "A-9223372036854775807", "A-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, n, ok := ParseItemKey(s)
		if !ok {
			return
		}
		if n <= 0 || ItemKey(p, n) != s {
			t.Fatalf("%q → %q %d, which formats as %q", s, p, n, ItemKey(p, n))
		}
	})
}

func TestNewID(t *testing.T) {
	now := time.Now()
	prev := ""
	for i := range 100 {
		id := NewID(now.Add(time.Duration(i) * time.Millisecond))
		if len(id) != 36 || id[14] != '7' || !strings.ContainsRune("89ab", rune(id[19])) || id <= prev {
			t.Fatalf("id %q after %q", id, prev)
		}
		prev = id
	}
	// Within one millisecond, and with the clock stepping back, ids still increase.
	for i := range 10000 {
		id := NewID(now.Add(-time.Duration(i%3) * time.Millisecond))
		if id <= prev {
			t.Fatalf("id %q after %q", id, prev)
		}
		prev = id
	}
}
