package httpapi

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
)

// Paging of listings: a request asks for at most limit entries after the cursor after, and
// the answer names the cursor of the page that follows in next (null on the last page).
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 500
	maxCursorBytes   = 512
)

// PageLimit is the limit of a listing's page asked for limit: DefaultPageLimit for 0, else
// limit itself, which ok says is from 1 to MaxPageLimit. The pages of the listings fill in
// their limits with it.
func PageLimit(limit int) (n int, ok bool) {
	if limit == 0 {
		return DefaultPageLimit, true
	}
	return limit, limit >= 1 && limit <= MaxPageLimit
}

// ParsePage reads a listing's query parameters limit and after: the limit (0 without one,
// which the listing's page fills in: PageLimit) and the n fields of a cursor EncodeCursor
// made for kind and scope (nil for the first page). A limit that is not an integer from 1
// to MaxPageLimit, or an after that is not such a cursor, is a 400 naming the parameter.
func ParsePage(r *http.Request, kind, scope string, n int) (limit int, after []string, err error) {
	q := r.URL.Query()
	if q.Has("limit") {
		limit, err = strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > MaxPageLimit {
			return 0, nil, Errorf(http.StatusBadRequest, "limit: want an integer from 1 to %d", MaxPageLimit)
		}
	}
	if q.Has("after") {
		if after = DecodeCursor(q.Get("after"), kind, scope, n); after == nil {
			return 0, nil, BadCursor()
		}
	}
	return limit, after, nil
}

// BadCursor is the 400 for an after that names no position of the listing: malformed,
// another listing's, or one whose fields do not fit.
func BadCursor() error {
	return Errorf(http.StatusBadRequest, "after: not a cursor of this listing (pass the next of its previous page)")
}

// EncodeCursor returns the opaque cursor of a position in the listing kind of scope (the
// project listed): the kind, the scope and the fields, as a base64url JSON array.
func EncodeCursor(kind, scope string, fields ...string) string {
	b, _ := json.Marshal(append([]string{kind, scope}, fields...)) // strings always marshal
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor returns the n fields of a cursor EncodeCursor made for kind and scope, nil
// for anything else.
func DecodeCursor(cursor, kind, scope string, n int) []string {
	if cursor == "" || len(cursor) > maxCursorBytes {
		return nil
	}
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return nil
	}
	var parts []string
	if json.Unmarshal(b, &parts) != nil || len(parts) != n+2 || parts[0] != kind || parts[1] != scope {
		return nil
	}
	return parts[2:]
}

// Field is a named value of a JSON answer.
type Field struct {
	Name  string
	Value any
}

// WritePage answers 200 with one page of a listing: a JSON object of fields, then entries
// under name, then "next", the cursor of the following page (null when next is ""). The
// entries are encoded one at a time as they are written, so that the answer is never held
// whole in memory. An error encoding the fields or the first entry is returned before
// anything is sent; a later entry that cannot be encoded cuts the answer off.
func WritePage[T any](w http.ResponseWriter, name string, entries []T, next string, fields ...Field) error {
	head := []byte{'{'}
	for _, f := range fields {
		v, err := json.Marshal(f.Value)
		if err != nil {
			return err
		}
		head = append(append(appendKey(head, f.Name), v...), ',')
	}
	head = append(appendKey(head, name), '[')
	if len(entries) > 0 {
		first, err := json.Marshal(entries[0])
		if err != nil {
			return err
		}
		head = append(head, first...)
	}
	var nextJSON any
	if next != "" {
		nextJSON = next
	}
	tail, _ := json.Marshal(nextJSON)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	ew := &errWriter{w: w}
	bw := bufio.NewWriterSize(ew, 32<<10)
	_, _ = bw.Write(head)
	for i := 1; i < len(entries); i++ {
		if ew.err != nil {
			return nil // the client went, or took nothing for too long: the answer is cut off
		}
		b, err := json.Marshal(entries[i])
		if err != nil {
			panic(http.ErrAbortHandler) // the status is sent: no problem can follow
		}
		_ = bw.WriteByte(',')
		_, _ = bw.Write(b)
	}
	_, _ = bw.WriteString(`],"next":`)
	_, _ = bw.Write(tail)
	_, _ = bw.WriteString("}\n")
	_ = bw.Flush()
	return nil
}

// errWriter remembers the first error of its writes.
type errWriter struct {
	w   http.ResponseWriter
	err error
}

func (e *errWriter) Write(b []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(b)
	e.err = err
	return n, err
}

func appendKey(b []byte, key string) []byte {
	k, _ := json.Marshal(key) // strings always marshal
	return append(append(b, k...), ':')
}
