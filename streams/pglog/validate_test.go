package pglog_test

import (
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pgtest"
)

// FuzzPayloadAgreesWithPostgres checks that NewEvent.Validate, which the memory log relies on,
// accepts exactly the payloads Postgres' jsonb accepts.
func FuzzPayloadAgreesWithPostgres(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1}`, `[1,"x",null]`, `"\u0000"`, `"\\u0000"`, `"\ud800"`, `"\ud83d\ude00"`, `"\udc00\ud800"`,
		`{"a":`, `1e5`, `1e131071`, `1e131072`, `9e131071`, `1e-16383`, `1e-16384`, `0.1e-16383`, `10e-16384`,
		`1.5e-16382`, `1.5e-16383`, `0e-99999`, `0e99999`, `-0.0e-16384`, `1e-16383000`, `0e1073741822`, `0e1073741823`,
		`0.00001e131076`, `0.00001e131077`, `[1E+131071, -2e+3]`, `{"n": 123456789012345678901234567890.5e-3}`,
		`0e99999999999999999999`, `-0.5E-3`, "\"\xff\"", `"\u00e9"`, "\"\x01\"", ` {"a" : [ ] } `, `{"a":1}x`,
	} {
		f.Add([]byte(s))
	}
	pool := pgtest.Pool(f)
	f.Fuzz(func(t *testing.T, payload []byte) {
		if len(payload) == 0 {
			return // means {}
		}
		e := streams.NewEvent{Payload: payload}
		goErr := e.Validate()
		var ok bool
		pgErr := pool.QueryRow(t.Context(), "SELECT $1::text::jsonb IS NOT NULL", string(payload)).Scan(&ok)
		if (goErr == nil) != (pgErr == nil) {
			t.Fatalf("payload %q: Validate = %v, Postgres = %v", payload, goErr, pgErr)
		}
	})
}
