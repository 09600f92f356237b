package apigen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ballet/gateway/protocol"
)

// skeleton is an asyncapi.yaml that describes no method by hand.
const skeleton = `asyncapi: 3.0.0
channels:
  rpc:
    messages:
      # generated: channel messages
      # end generated: channel messages
operations:
  # generated: operations
  # end generated: operations
components:
  messages:
    # generated: messages
    # end generated: messages
  schemas:
    # generated: schemas
    # end generated: schemas
`

const md = "A ping:\n\n```json\n" + `{"jsonrpc":"2.0","id":7,"method":"system.ping","params":{}}` + "\n```\n\n" +
	"It answers. The clock:\n\n```json\n" + `{"jsonrpc":"2.0","id":7,"result":{"time":1,"subject":"a"}}` + "\n```\n"

// TestAsyncAPIFromNothing: with no method described by hand, each method of the table gets its
// operation, messages and schemas, with protocol.md's examples; a second run changes nothing.
func TestAsyncAPIFromNothing(t *testing.T) {
	out, err := AsyncAPI([]byte(skeleton), []byte(md), "../../protocol")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(out)
	for _, name := range protocol.Names(protocol.Served | protocol.Sent) {
		m, _ := protocol.Lookup(name)
		op := camel(name)
		for _, want := range []string{"\n  " + op + ":\n", "    title: " + name + "\n", "const: " + name + "\n",
			"\n    " + m.Params.Name() + ":\n", "    summary: " + quote(m.Summary) + "\n"} {
			if !strings.Contains(doc, want) {
				t.Errorf("%s: no %q", name, want)
			}
		}
		if m.Result != nil && !strings.Contains(doc, "\n    "+m.Result.Name()+":\n") {
			t.Errorf("%s: no schema %s", name, m.Result.Name())
		}
	}
	for _, want := range []string{
		`payload: {"jsonrpc":"2.0","id":7,"method":"system.ping","params":{}}`,
		`payload: {"jsonrpc":"2.0","id":7,"result":{"time":1,"subject":"a"}}`,
		`summary: "The clock."`, "            - 'null'\n", "            - not_found\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("no %q in\n%s", want, doc)
		}
	}
	again, err := AsyncAPI(out, []byte(md), "../../protocol")
	if err != nil || !bytes.Equal(again, out) {
		t.Errorf("a second run changed the document (%v)", err)
	}
	if _, err := AsyncAPI([]byte("asyncapi: 3.0.0\n"), nil, "../../protocol"); err == nil {
		t.Error("a document without the generated places was accepted")
	}
}

func TestCamel(t *testing.T) {
	for in, want := range map[string]string{"system.ping": "systemPing", "$/heartbeat": "heartbeat", "a.b_c": "aBC"} {
		if got := camel(in); got != want {
			t.Errorf("camel(%q) = %q, want %q", in, got, want)
		}
	}
}
