package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"title":"t"}`, `{"title":null}`, `{"title":1}`, `[]`, `{} {}`, `{"x":1}`, `{"title":"a","title":"b"}`, `{`, ` {"state":"done"} `, `{"description":"\ud800"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req struct {
			Title       *string `json:"title"`
			Description *string `json:"description"`
			State       *string `json:"state"`
		}
		err := decodeJSON(b, &req, false)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Detail == "" {
				t.Fatalf("%q: error %v is not a 400 with a detail", b, err)
			}
			if strings.Contains(e.Detail, "struct") || strings.Contains(e.Detail, "Go ") {
				t.Fatalf("%q: detail %q leaks internals", b, e.Detail)
			}
			return
		}
		for _, p := range []*string{req.Title, req.Description, req.State} {
			if p != nil && !utf8.ValidString(*p) {
				t.Fatalf("%q: decoded invalid UTF-8", b)
			}
		}
	})
}

func FuzzDecodeCursor(f *testing.F) {
	for _, s := range []string{EncodeCursor("items", "WEB", "42", "7"), EncodeCursor("sessions", "WEB", "1", "x"), "", "W10", "bnVsbA", "WyJpdGVtcyJd", "%%%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields := DecodeCursor(s, "items", "WEB", 2)
		if fields == nil {
			return
		}
		if again := DecodeCursor(EncodeCursor("items", "WEB", fields...), "items", "WEB", 2); len(again) != 2 || again[0] != fields[0] || again[1] != fields[1] {
			t.Fatalf("%q: fields %q do not round-trip (%q)", s, fields, again)
		}
	})
}
