package protocol

import (
	"reflect"
	"strings"
)

// Field is one key of a wire type (a method's Params or Result).
type Field struct {
	Name     string // the key, in JSON and MessagePack
	Type     reflect.Type
	Optional bool     // omitempty: its sender leaves it out when it is zero
	Enum     []string // the values it takes, from its enum tag ("a|b|c"); nil for any
}

// Fields returns the keys of a struct type in their order on the wire, with those of an
// embedded struct in its place.
func Fields(t reflect.Type) []Field {
	var out []Field
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, Fields(f.Type)...)
			continue
		}
		tag, ok := f.Tag.Lookup("json")
		if !ok || tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		out = append(out, Field{Name: name, Type: f.Type, Optional: opts == "omitempty", Enum: enum(f.Tag.Get("enum"))})
	}
	return out
}

func enum(tag string) []string {
	if tag == "" {
		return nil
	}
	return strings.Split(tag, "|")
}
