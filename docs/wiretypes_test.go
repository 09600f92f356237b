package docs

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/apigen"
	"github.com/ballet/gateway/protocol"
)

// TestRealtimeWireTypes: each operation's params and result in asyncapi.yaml are the Go types
// of the protocol table, key for key: the same keys (params may also carry _meta), each of the
// JSON type its Go type encodes to, with the same values where the Go field lists them; what the
// gateway sends (results, its notifications' params, -32029's data) requires exactly the keys it
// always writes.
func TestRealtimeWireTypes(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	ops, _ := at(doc, "operations").(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		op := ops[name]
		msgs, _ := at(op, "messages").([]any)
		payload := deref(t, doc, at(deref(t, doc, msgs[0]), "payload"))
		method, _ := at(deref(t, doc, at(payload, "properties", "method")), "const").(string)
		m, ok := protocol.Lookup(method)
		if !ok {
			continue // TestRealtimeMethods reports it
		}
		sent := at(op, "action") == "send"
		checkSchema(t, doc, method+" params", at(payload, "properties", "params"), m.Params, sent, true)
		replies, _ := at(op, "reply", "messages").([]any)
		if m.Result == nil {
			continue
		}
		if len(replies) == 0 {
			t.Errorf("%s: a request without a reply in asyncapi.yaml", method)
			continue
		}
		// The first reply is the success; the others are errors.
		reply := deref(t, doc, at(deref(t, doc, replies[0]), "payload"))
		checkSchema(t, doc, method+" result", at(reply, "properties", "result"), m.Result, true, false)
	}
	// The data of -32029, with the names of its limits.
	checkSchema(t, doc, "LimitData", at(doc, "components", "schemas", "LimitData"), reflect.TypeFor[protocol.LimitData](), true, false)
}

// checkSchema holds one schema of asyncapi.yaml against a Go type; sent: the gateway writes it;
// params: a method's params, which may carry _meta (trace context) besides their own keys.
func checkSchema(t *testing.T, doc map[string]any, what string, schema any, typ reflect.Type, sent, params bool) {
	t.Helper()
	schema = deref(t, doc, schema)
	props, _ := at(schema, "properties").(map[string]any)
	fields := protocol.Fields(typ)
	var want, required []string
	for _, f := range fields {
		want = append(want, f.Name)
		if !f.Optional {
			required = append(required, f.Name)
		}
		p, ok := props[f.Name]
		if !ok {
			continue
		}
		checkField(t, doc, fmt.Sprintf("%s.%s", what, f.Name), deref(t, doc, p), f, sent)
	}
	got := slices.DeleteFunc(slices.Sorted(maps.Keys(props)), func(k string) bool { return k == "_meta" && params })
	if slices.Sort(want); !slices.Equal(got, want) {
		t.Errorf("%s: asyncapi.yaml has the keys %v; %s has %v", what, got, typ, want)
	}
	if !sent {
		return
	}
	var req []string
	for _, r := range asList(at(schema, "required")) {
		req = append(req, fmt.Sprint(r))
	}
	slices.Sort(req)
	if slices.Sort(required); !slices.Equal(req, required) {
		t.Errorf("%s: asyncapi.yaml requires %v; the gateway always writes %v (%s's fields without omitempty)", what, req, required, typ)
	}
}

// checkField holds one property against its Go field: its JSON type, its values, and the keys
// of an object or of an array's objects.
func checkField(t *testing.T, doc map[string]any, what string, p any, f protocol.Field, sent bool) {
	t.Helper()
	if f.Type == reflect.TypeFor[codec.RawJSON]() {
		return // any JSON value; described in words
	}
	// A pointer without omitempty is a value that may be null (entity_key); the gateway always
	// writes a pointer to an object (the auth result's limits), which is a pointer for the Go
	// client to tell it from an older server's absent one.
	typ, nullable := f.Type, false
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
		nullable = !f.Optional && typ.Kind() != reflect.Struct
	}
	var want string
	switch typ.Kind() {
	case reflect.String:
		want = "string"
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int64:
		want = "integer"
	case reflect.Slice:
		want = "array"
	case reflect.Struct:
		want = "object"
	default:
		t.Errorf("%s: Go type %s has no JSON type here", what, f.Type)
		return
	}
	types := asList(at(p, "type"))
	if len(types) == 0 {
		// A constant or a list of values, without a type: their JSON type.
		for _, v := range append(asList(at(p, "enum")), at(p, "const")) {
			if v != nil {
				types = append(types, jsonType(v))
			}
		}
	}
	wantTypes := []any{want}
	if nullable {
		wantTypes = append(wantTypes, "null")
	}
	if !slices.Equal(types, wantTypes) {
		t.Errorf("%s: asyncapi.yaml's type %v, the Go field's %v (%s)", what, types, wantTypes, f.Type)
	}
	switch {
	case typ.Kind() == reflect.Struct:
		checkSchema(t, doc, what, p, typ, sent, false)
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct:
		checkSchema(t, doc, what+"[]", at(p, "items"), typ.Elem(), sent, false)
	}
	var enum []string
	for _, v := range asList(at(p, "enum")) {
		enum = append(enum, fmt.Sprint(v))
	}
	if f.Enum != nil && !slices.Equal(enum, f.Enum) {
		t.Errorf("%s: asyncapi.yaml's values %v, the Go field's enum tag %v", what, enum, f.Enum)
	}
}

// asList is a YAML value that may be one item or a list, as a list.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64, int:
		return "integer"
	}
	return fmt.Sprintf("%T", v)
}

// TestAsyncAPIGenerated: asyncapi.yaml's generated places hold what package protocol's table
// has and its hand-written text does not describe (internal/apigen): a method added to the table
// is described once make generate has run.
func TestAsyncAPIGenerated(t *testing.T) {
	doc, err := os.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := apigen.AsyncAPI(doc, md, "../protocol")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, want) {
		t.Fatal("asyncapi.yaml's generated places are not what package protocol's table gives: run make generate")
	}
}
