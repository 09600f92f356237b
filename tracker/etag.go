package tracker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// decodeBody reads a JSON object into v: 415 unless the content type is JSON, 413 over max
// bytes, 400 for malformed JSON, unknown fields, wrong types, null values or trailing data.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, v any) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return requestError(http.StatusUnsupportedMediaType, "the request body must be application/json")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return requestError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body exceeds %d bytes", max))
		}
		return requestError(http.StatusBadRequest, "the request body could not be read")
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes one JSON object into v strictly; errors are 400s with a detail that
// names only the caller's fields.
func decodeJSON(body []byte, v any) error {
	bad := func(format string, args ...any) error {
		return requestError(http.StatusBadRequest, fmt.Sprintf(format, args...))
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return bad("the request body must be a JSON object")
	}
	// Null is no value of any field: reject it rather than read it as absent.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return jsonError(err)
	}
	for k, raw := range fields {
		if string(raw) == "null" {
			return bad("field %q: null is not accepted", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("the request body must hold one JSON object only")
	}
	return nil
}

func jsonError(err error) error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &se):
		return requestError(http.StatusBadRequest, fmt.Sprintf("malformed JSON at byte %d", se.Offset))
	case errors.As(err, &te) && te.Field != "":
		return requestError(http.StatusBadRequest, fmt.Sprintf("field %q: a JSON %s is not accepted", te.Field, te.Value))
	case errors.As(err, &te):
		return requestError(http.StatusBadRequest, "the request body must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return requestError(http.StatusBadRequest, "malformed JSON: unexpected end")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return requestError(http.StatusBadRequest, "unknown field "+msg)
	}
	return requestError(http.StatusBadRequest, "malformed JSON")
}

// ParseIfMatch returns the version an If-Match header value requires: nil when the header is
// absent or "*". It accepts "3", 3 and W/"3" (a weak tag compares like a strong one: versions
// have no weak form). A well-formed tag that is no version, like "abc", gives -1, which no
// item has; anything else (a list, a broken tag) is an error.
func ParseIfMatch(h string) (*int64, error) {
	h = strings.TrimSpace(h)
	if h == "" || h == "*" {
		return nil, nil
	}
	tag := strings.TrimPrefix(h, "W/")
	quoted := strings.HasPrefix(tag, `"`)
	switch {
	case quoted:
		if len(tag) < 2 || !strings.HasSuffix(tag, `"`) || strings.ContainsAny(tag[1:len(tag)-1], "\" ,\t") {
			return nil, errors.New(`If-Match: want one entity tag, "<version>"`)
		}
		tag = tag[1 : len(tag)-1]
	case tag != h:
		return nil, errors.New(`If-Match: want one entity tag, "<version>"`)
	}
	if v, ok := parseVersion(tag); ok {
		return &v, nil
	}
	if quoted {
		none := int64(-1)
		return &none, nil
	}
	return nil, errors.New(`If-Match: want one entity tag, "<version>"`)
}

func parseVersion(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }
