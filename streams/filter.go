package streams

import (
	"strings"
	"unicode/utf8"

	"github.com/ballet/gateway/internal/fault"
)

// Bounds of a type filter (stream.subscribe's "types").
const (
	MaxTypePatterns = 32
	MaxTypePattern  = 64 // characters
)

// ErrBadTypes: a type filter that is not a list of event types or prefixes; ParseTypes'
// is a *fault.Error whose detail says what is wrong.
var ErrBadTypes = fault.New(fault.Invalid, "streams: bad type filter")

// TypeFilter selects events by type: exact names ("dependency.added") or prefixes written
// with a trailing "*" ("item.*"; "*" alone is every type). The zero of *TypeFilter, nil,
// selects everything.
type TypeFilter struct {
	exact    map[string]struct{}
	prefixes []string
	key      string // filterKey: equal filters have equal keys
}

// ParseTypes builds a filter from patterns: 1 to MaxTypePatterns of them, each 1 to
// MaxTypePattern characters of text with "*" only at its end. nil patterns give a nil filter.
func ParseTypes(patterns []string) (*TypeFilter, error) {
	if patterns == nil {
		return nil, nil
	}
	if len(patterns) == 0 || len(patterns) > MaxTypePatterns {
		return nil, fault.Errorf(ErrBadTypes, "types must list 1 to %d event types", MaxTypePatterns)
	}
	f := &TypeFilter{exact: make(map[string]struct{}, len(patterns))}
	for i, p := range patterns {
		n := utf8.RuneCountInString(p)
		star := strings.IndexByte(p, '*')
		switch {
		case n == 0 || n > MaxTypePattern || !validText(p):
			return nil, fault.Errorf(ErrBadTypes, "types[%d] must be 1 to %d characters of text", i, MaxTypePattern)
		case star >= 0 && star != len(p)-1:
			return nil, fault.Errorf(ErrBadTypes, "types[%d] may have \"*\" only at its end", i)
		case star >= 0:
			f.prefixes = append(f.prefixes, p[:star])
		default:
			f.exact[p] = struct{}{}
		}
	}
	f.key = filterKey(f.exact, f.prefixes)
	return f, nil
}

// Match reports whether an event of type t is selected.
func (f *TypeFilter) Match(t string) bool {
	if f == nil {
		return true
	}
	if _, ok := f.exact[t]; ok {
		return true
	}
	for _, p := range f.prefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}
