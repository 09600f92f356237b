package docs

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// jsConsts reads the integer values of `export const name = Object.freeze({...})` in the
// browser client's errors.js: what its TypeScript declarations give web developers.
func jsConsts(t *testing.T, name string) []int {
	t.Helper()
	src, err := os.ReadFile("../web/src/client/errors.js")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)export const ` + name + ` = Object\.freeze\(\{(.*?)\}\);`).FindSubmatch(src)
	if block == nil {
		t.Fatalf("errors.js has no %s", name)
	}
	var out []int
	for _, m := range regexp.MustCompile(`(?m)^\s*\w+:\s*(-?\d+),`).FindAllSubmatch(block[1], -1) {
		n, _ := strconv.Atoi(string(m[1]))
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestClientCodes: the browser client's Code and CloseCode (and so its declarations) name
// exactly the error and close codes asyncapi.yaml and the server use.
func TestClientCodes(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	if got, want := jsConsts(t, "Code"), sortedKeys(oneOfConsts(t, doc, "ErrorCode")); !slices.Equal(got, want) {
		t.Errorf("web/src/client/errors.js Code has %v; asyncapi.yaml's ErrorCode %v", got, want)
	}
	if got, want := jsConsts(t, "CloseCode"), sortedKeys(oneOfConsts(t, doc, "CloseCode")); !slices.Equal(got, want) {
		t.Errorf("web/src/client/errors.js CloseCode has %v; asyncapi.yaml's CloseCode %v", got, want)
	}
	decl, err := os.ReadFile("../web/src/client/types/errors.d.ts")
	if err != nil || !strings.Contains(string(decl), "LimitExceeded") {
		t.Errorf("the declarations of errors.js lack its codes: %v", err)
	}
}
