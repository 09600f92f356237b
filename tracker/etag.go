package tracker

import (
	"errors"
	"strconv"
	"strings"
)

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
