package httpapi_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/ballet/gateway/internal/httpapi"
)

func TestParsePage(t *testing.T) {
	cursor := httpapi.EncodeCursor("things", "WEB", "42", "x")
	for _, c := range []struct {
		query string
		limit int
		after []string
		bad   string // the parameter a 400 names
	}{
		{"", 0, nil, ""}, // the listing's page fills it in
		{"?limit=1", 1, nil, ""},
		{"?limit=500&after=" + cursor, 500, []string{"42", "x"}, ""},
		{"?state=ready&limit=7", 7, nil, ""},
		{"?limit=0", 0, nil, "limit"},
		{"?limit=501", 0, nil, "limit"},
		{"?limit=-1", 0, nil, "limit"},
		{"?limit=abc", 0, nil, "limit"},
		{"?limit=1.5", 0, nil, "limit"},
		{"?limit=", 0, nil, "limit"},
		{"?limit=99999999999999999999", 0, nil, "limit"},
		{"?after=", 0, nil, "after"},
		{"?after=abc", 0, nil, "after"},
		{"?after=" + cursor + "x", 0, nil, "after"},
		{"?after=" + httpapi.EncodeCursor("others", "WEB", "42", "x"), 0, nil, "after"},
		{"?after=" + httpapi.EncodeCursor("things", "API", "42", "x"), 0, nil, "after"},
		{"?after=" + httpapi.EncodeCursor("things", "WEB", "42"), 0, nil, "after"},
		{"?after=" + strings.Repeat("A", 600), 0, nil, "after"},
	} {
		limit, after, err := httpapi.ParsePage(httptest.NewRequest("GET", "/x"+c.query, nil), "things", "WEB", 2)
		if c.bad == "" {
			if err != nil || limit != c.limit || !slices.Equal(after, c.after) {
				t.Errorf("%q: %d %q %v, want %d %q", c.query, limit, after, err, c.limit, c.after)
			}
			continue
		}
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !strings.HasPrefix(e.Detail, c.bad+":") {
			t.Errorf("%q: %v, want a 400 naming %s", c.query, err, c.bad)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for _, c := range []struct{ limit, n int }{{0, 100}, {1, 1}, {500, 500}, {501, -1}, {-1, -1}} {
		n, ok := httpapi.PageLimit(c.limit)
		if ok != (c.n > 0) || ok && n != c.n {
			t.Errorf("PageLimit(%d) = %d, %v; want %d", c.limit, n, ok, c.n)
		}
	}
}

func TestCursor(t *testing.T) {
	for _, fields := range [][]string{{"WEB", "1"}, {"", "with \"quotes\" and / + ="}, {"é", "\u2028"}} {
		c := httpapi.EncodeCursor("k", "P", fields...)
		if strings.ContainsAny(c, "+/=%&? ") {
			t.Errorf("cursor %q needs escaping in a URL", c)
		}
		if got := httpapi.DecodeCursor(c, "k", "P", len(fields)); !slices.Equal(got, fields) {
			t.Errorf("%q: decoded %q, want %q", c, got, fields)
		}
		if httpapi.DecodeCursor(c, "other", "P", len(fields)) != nil || httpapi.DecodeCursor(c, "k", "Q", len(fields)) != nil ||
			httpapi.DecodeCursor(c, "k", "P", len(fields)+1) != nil {
			t.Errorf("%q: decoded as another listing's", c)
		}
	}
}

type entry struct {
	N int    `json:"n"`
	S string `json:"s"`
}

// TestWritePage: the streamed answer is the JSON object the fields, entries and next make.
func TestWritePage(t *testing.T) {
	for _, c := range []struct {
		entries []entry
		next    string
		fields  []httpapi.Field
	}{
		{nil, "", nil},
		{[]entry{{1, "<a>"}}, "", []httpapi.Field{{Name: "seq", Value: 7}}},
		{[]entry{{1, "x"}, {2, strings.Repeat("é", 40000)}, {3, ""}}, "c1", []httpapi.Field{{Name: "seq", Value: 0}, {Name: "other", Value: []int{1}}}},
	} {
		w := httptest.NewRecorder()
		if err := httpapi.WritePage(w, "entries", c.entries, c.next, c.fields...); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"entries": c.entries, "next": nil}
		if c.entries == nil {
			want["entries"] = []entry{}
		}
		if c.next != "" {
			want["next"] = c.next
		}
		for _, f := range c.fields {
			want[f.Name] = f.Value
		}
		wj, _ := json.Marshal(want)
		var got, exp any
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%.200s: %v", w.Body.Bytes(), err)
		}
		_ = json.Unmarshal(wj, &exp)
		gj, _ := json.Marshal(got)
		ej, _ := json.Marshal(exp)
		if string(gj) != string(ej) || w.Code != 200 || w.Header().Get("Content-Type") != "application/json" ||
			w.Header().Get("Cache-Control") != "no-store" || !strings.HasSuffix(w.Body.String(), "}\n") {
			t.Errorf("%d %v %.300s, want %.300s", w.Code, w.Header(), w.Body.String(), wj)
		}
	}
	w := httptest.NewRecorder()
	if err := httpapi.WritePage(w, "entries", []any{func() {}}, ""); err == nil || w.Body.Len() != 0 {
		t.Fatalf("an entry that cannot be encoded: %v, wrote %q", err, w.Body.String())
	}
}
