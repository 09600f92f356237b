package streams

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// StreamKind says which events a stream carries.
type StreamKind uint8

const (
	// StreamProject is "project:<KEY>": events whose project_key is KEY.
	StreamProject StreamKind = iota + 1
	// StreamItem is "item:<KEY>": events whose entity_type is "item" and entity_key is KEY.
	StreamItem
)

// MaxStreamKey is the longest stream key accepted, in bytes.
const MaxStreamKey = 200

func (k StreamKind) String() string {
	switch k {
	case StreamProject:
		return "project"
	case StreamItem:
		return "item"
	}
	return fmt.Sprintf("StreamKind(%d)", uint8(k))
}

// Stream names a change stream.
type Stream struct {
	Kind StreamKind
	Key  string
}

// ParseStream parses "project:<KEY>" or "item:<KEY>". Anything else (unknown kind, empty key, a
// key longer than MaxStreamKey bytes, not UTF-8, or with whitespace or control characters) is an
// error wrapping ErrBadStream.
func ParseStream(s string) (Stream, error) {
	kind, key, ok := strings.Cut(s, ":")
	if !ok {
		return Stream{}, fmt.Errorf("stream %q: want project:<KEY> or item:<KEY>: %w", s, ErrBadStream)
	}
	var st Stream
	switch kind {
	case "project":
		st.Kind = StreamProject
	case "item":
		st.Kind = StreamItem
	default:
		return Stream{}, fmt.Errorf("stream %q: unknown kind %q: %w", s, kind, ErrBadStream)
	}
	if err := checkKey(key); err != nil {
		return Stream{}, fmt.Errorf("stream %q: %s: %w", s, err, ErrBadStream)
	}
	st.Key = key
	return st, nil
}

func checkKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("empty key")
	case len(key) > MaxStreamKey:
		return fmt.Errorf("key longer than %d bytes", MaxStreamKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("key is not UTF-8")
	}
	for _, r := range key {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("key contains whitespace or control characters")
		}
	}
	return nil
}

// String returns the stream's name, as ParseStream accepts it.
func (s Stream) String() string {
	return s.Kind.String() + ":" + s.Key
}

// Matches reports whether e belongs to the stream.
func (s Stream) Matches(e *Event) bool {
	switch s.Kind {
	case StreamProject:
		return e.ProjectKey == s.Key
	case StreamItem:
		return e.EntityType == "item" && e.EntityKey == s.Key
	}
	return false
}

// Project returns the project whose permissions govern the stream: the key of a project
// stream, and for an item stream the text before the last '-' of "<PROJECT>-<n>" ("" if the
// key has no '-').
func (s Stream) Project() string {
	switch s.Kind {
	case StreamProject:
		return s.Key
	case StreamItem:
		if i := strings.LastIndexByte(s.Key, '-'); i > 0 {
			return s.Key[:i]
		}
	}
	return ""
}
