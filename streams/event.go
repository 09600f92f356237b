package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors shared by the event log implementations. Compare with errors.Is.
var (
	// ErrNotFound: the project or membership does not exist.
	ErrNotFound = errors.New("streams: not found")
	// ErrExists: the project already exists.
	ErrExists = errors.New("streams: already exists")
	// ErrInvalid: an argument (project key, role, payload, text field) is not acceptable.
	ErrInvalid = errors.New("streams: invalid argument")
	// ErrClosed: the log or tailer was closed.
	ErrClosed = errors.New("streams: closed")
	// ErrBadStream: a stream name is neither "project:<KEY>" nor "item:<KEY>".
	ErrBadStream = errors.New("streams: bad stream name")
)

// Actor kinds of the events the gateway writes (docs/event-log.md): a person, the planner acting
// for a person, a program with its own identity, and an operator's action from the command line
// or the development seed.
const (
	ActorHuman   = "human"
	ActorAgent   = "agent"
	ActorService = "service"
	ActorSystem  = "system"
)

// ActorKinds lists every actor kind the gateway writes.
func ActorKinds() []string { return []string{ActorHuman, ActorAgent, ActorService, ActorSystem} }

// Event is one row of the event log.
type Event struct {
	Seq          int64
	ProjectKey   string
	Type         string
	EntityType   string
	EntityID     string
	EntityKey    string // "" when NULL in the table
	OccurredAt   time.Time
	ActorKind    string
	ActorSubject string
	Payload      []byte // JSON text (jsonb rendered by Postgres); "{}" when empty
}

// NewEvent is what a writer appends. The log assigns Seq.
type NewEvent struct {
	ProjectKey   string
	Type         string
	EntityType   string
	EntityID     string
	EntityKey    string    // "" is stored as NULL
	OccurredAt   time.Time // zero means the time of the append (now() in Postgres)
	ActorKind    string
	ActorSubject string
	Payload      []byte // JSON; nil or empty means {}
}

// Validate reports, wrapped in ErrInvalid, what Postgres would refuse: text that is not
// UTF-8 or contains NUL, and a payload that is not one JSON value.
func (e *NewEvent) Validate() error {
	fields := [...]struct{ name, v string }{
		{"project_key", e.ProjectKey}, {"type", e.Type}, {"entity_type", e.EntityType},
		{"entity_id", e.EntityID}, {"entity_key", e.EntityKey},
		{"actor_kind", e.ActorKind}, {"actor_subject", e.ActorSubject},
	}
	for _, f := range fields {
		if !validText(f.v) {
			return fmt.Errorf("event %s %q: not UTF-8 text without NUL: %w", f.name, f.v, ErrInvalid)
		}
	}
	if len(e.Payload) > 0 {
		if !utf8.Valid(e.Payload) || !json.Valid(e.Payload) {
			return fmt.Errorf("event %s payload: not valid JSON: %w", e.Type, ErrInvalid)
		}
		if err := jsonbCheck(e.Payload); err != nil {
			return fmt.Errorf("event %s payload: %v: %w", e.Type, err, ErrInvalid)
		}
	}
	return nil
}

// PayloadOrEmpty returns the payload to store: the given JSON, or {} when empty.
func (e *NewEvent) PayloadOrEmpty() []byte {
	if len(e.Payload) == 0 {
		return []byte("{}")
	}
	return e.Payload
}

// ValidText reports whether s can be stored in a text column: UTF-8 without NUL.
func ValidText(s string) bool { return validText(s) }

func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// jsonbCheck refuses, in valid JSON, what Postgres' jsonb refuses and encoding/json accepts:
// the \u0000 escape, unpaired UTF-16 surrogates, and numbers outside numeric's range.
func jsonbCheck(b []byte) error {
	inString := false
	pendingHigh := false // the previous escape was a high surrogate
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			switch {
			case c == '"':
				inString = true
			case c == '-' || c >= '0' && c <= '9':
				n, err := numericCheck(b[i:])
				if err != nil {
					return err
				}
				i += n - 1
			}
			continue
		}
		switch c {
		case '"':
			if pendingHigh {
				return errors.New("unpaired high surrogate")
			}
			inString = false
		case '\\':
			i++
			if b[i] != 'u' {
				if pendingHigh {
					return errors.New("unpaired high surrogate")
				}
				continue
			}
			var r rune
			for _, h := range b[i+1 : i+5] {
				r <<= 4
				switch {
				case h >= '0' && h <= '9':
					r |= rune(h - '0')
				case h >= 'a' && h <= 'f':
					r |= rune(h-'a') + 10
				default:
					r |= rune(h-'A') + 10
				}
			}
			i += 4
			switch {
			case r == 0:
				return errors.New("\\u0000 is not allowed")
			case r >= 0xD800 && r < 0xDC00:
				if pendingHigh {
					return errors.New("unpaired high surrogate")
				}
				pendingHigh = true
			case r >= 0xDC00 && r < 0xE000:
				if !pendingHigh {
					return errors.New("unpaired low surrogate")
				}
				pendingHigh = false
			default:
				if pendingHigh {
					return errors.New("unpaired high surrogate")
				}
			}
		default:
			if pendingHigh {
				return errors.New("unpaired high surrogate")
			}
		}
	}
	return nil
}

// Limits of Postgres' numeric, which jsonb stores numbers as.
const (
	numericMaxScale    = 16383     // digits after the decimal point
	numericMaxWeight   = 131071    // decimal exponent of the most significant digit
	numericMaxExponent = 1<<30 - 1 // |exponent| written in the input (INT_MAX/2)
)

// numericCheck checks the JSON number at the start of b against numeric's limits and returns
// its length.
func numericCheck(b []byte) (int, error) {
	i := 0
	if b[i] == '-' {
		i++
	}
	digits := func() (start, end int) {
		start = i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return start, i
	}
	is, ie := digits()
	fs, fe := i, i
	if i < len(b) && b[i] == '.' {
		i++
		fs, fe = digits()
	}
	exp := int64(0)
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		neg := false
		if b[i] == '+' || b[i] == '-' {
			neg = b[i] == '-'
			i++
		}
		es, ee := digits()
		for _, d := range b[es:ee] {
			exp = exp*10 + int64(d-'0')
			if exp >= numericMaxExponent {
				return 0, errors.New("number exponent out of range")
			}
		}
		if neg {
			exp = -exp
		}
	}
	if scale := int64(fe-fs) - exp; scale > numericMaxScale {
		return 0, errors.New("number has too many digits after the decimal point")
	}
	// The most significant non-zero digit's decimal position, if any.
	for k := is; k < ie; k++ {
		if b[k] != '0' {
			if int64(ie-1-k)+exp > numericMaxWeight {
				return 0, errors.New("number too large")
			}
			return i, nil
		}
	}
	for k := fs; k < fe; k++ {
		if b[k] != '0' {
			if int64(-(k-fs+1))+exp > numericMaxWeight {
				return 0, errors.New("number too large")
			}
			return i, nil
		}
	}
	return i, nil
}
