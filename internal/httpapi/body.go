package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
)

// DecodeBody reads the request's JSON object into v: 415 unless the content type is JSON
// (application/json or application/*+json), 413 over the body limit, 400 for malformed JSON,
// unknown fields, wrong types, null values or trailing data.
func (a *API) DecodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	if err := checkJSON(r); err != nil {
		return err
	}
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeJSON(body, v, false)
}

// DecodeOptionalBody is DecodeBody for a body whose fields are all optional: an empty (or
// blank) body, of any content type, leaves v as it is, and a null field is read as absent.
func (a *API) DecodeOptionalBody(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := a.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := checkJSON(r); err != nil {
		return err
	}
	return decodeJSON(body, v, true)
}

// checkJSON refuses a body whose content type is not JSON with 415.
func checkJSON(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || !(mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return Errorf(http.StatusUnsupportedMediaType, "the request body must be application/json")
	}
	return nil
}

// readBody reads the whole body: 413 past the limit, 400 when it cannot be read.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, Errorf(http.StatusRequestEntityTooLarge, "the request body exceeds %d bytes", a.maxBody)
		}
		return nil, Errorf(http.StatusBadRequest, "the request body could not be read")
	}
	return body, nil
}

// decodeJSON decodes one JSON object into v strictly; errors are 400s with a detail that
// names only the caller's fields. Null fields are refused unless nullAbsent.
func decodeJSON(body []byte, v any, nullAbsent bool) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return Errorf(http.StatusBadRequest, "the request body must be a JSON object")
	}
	// Where a field may be required or cleared, null is neither: reject it rather than read
	// it as absent.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return jsonError(err)
	}
	for k, raw := range fields {
		if string(raw) == "null" && !nullAbsent {
			return Errorf(http.StatusBadRequest, "field %q: null is not accepted", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(http.StatusBadRequest, "the request body must hold one JSON object only")
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
		return Errorf(http.StatusBadRequest, "malformed JSON at byte %d", se.Offset)
	case errors.As(err, &te) && te.Field != "":
		return Errorf(http.StatusBadRequest, "field %q: a JSON %s is not accepted", te.Field, te.Value)
	case errors.As(err, &te):
		return Errorf(http.StatusBadRequest, "the request body must be a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, "malformed JSON: unexpected end")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return Errorf(http.StatusBadRequest, "unknown field %s", msg)
	}
	return Errorf(http.StatusBadRequest, "malformed JSON")
}

// DiscardBody reads and drops the body of a request whose route takes none, within the body
// limit: 413 past it, so that a route without a body holds to the limit as the others do.
func (a *API) DiscardBody(w http.ResponseWriter, r *http.Request) error {
	_, err := a.readBody(w, r)
	return err
}
