package docs

import (
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/ballet/gateway/protocol"
)

// TestLimitsFields: the limits of the auth result are the fields of protocol.Limits, which
// the gateway sends and the Go client decodes, and protocol.md's table, asyncapi.yaml's Limits
// schema (required unless the gateway may leave one out) and the browser client's Limits name
// exactly those.
func TestLimitsFields(t *testing.T) {
	server := jsonFields(reflect.TypeFor[protocol.Limits]())
	want := slices.Sorted(maps.Keys(server))
	check := func(where string, got []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s names the limits %v; the gateway advertises %v", where, got, want)
		}
	}

	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| `BALLET_").FindAllStringSubmatch(section(t, "Limits"), -1) {
		table = append(table, m[1])
	}
	check("protocol.md's Limits table", table)

	schema := deref(t, descriptions(t).AsyncAPI, at(descriptions(t).AsyncAPI, "components", "schemas", "Limits"))
	props, _ := at(schema, "properties").(map[string]any)
	check("asyncapi.yaml's Limits", slices.Collect(maps.Keys(props)))
	var required, mandatory []string
	for _, r := range at(schema, "required").([]any) {
		required = append(required, r.(string))
	}
	for name, omitted := range server {
		if !omitted {
			mandatory = append(mandatory, name)
		}
	}
	slices.Sort(required)
	if slices.Sort(mandatory); !slices.Equal(required, mandatory) {
		t.Errorf("asyncapi.yaml's Limits requires %v; the gateway always sends %v", required, mandatory)
	}

	src, err := os.ReadFile("../web/src/client/wire.js")
	if err != nil {
		t.Fatal(err)
	}
	typedef := regexp.MustCompile(`(?s)@typedef \{object\} Limits .*?\*/`).Find(src)
	var js []string
	for _, m := range regexp.MustCompile(`@property \{number\} \[?([a-z_]+)\]?`).FindAllSubmatch(typedef, -1) {
		js = append(js, string(m[1]))
	}
	check("the browser client's Limits (wire.js)", js)
}
