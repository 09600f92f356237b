package docs

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// The realtime API: protocol.md, asyncapi.yaml and the gateway agree on the methods and
// notifications, the error codes, the close codes, the subprotocols and the examples.

func protocolDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The same pattern as codec/docs_test.go: every JSON example is followed by its MessagePack.
var exampleRE = regexp.MustCompile("(?s)```json\n(.*?)\n```\n\n```msgpack-hex\n(.*?)\n```")

// protocolExamples returns protocol.md's JSON examples, in order.
func protocolExamples(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range exampleRE.FindAllStringSubmatch(protocolDoc(t), -1) {
		out = append(out, m[1])
	}
	if len(out) < 10 {
		t.Fatalf("found only %d examples in protocol.md", len(out))
	}
	return out
}

// section returns the text under a "## " heading of protocol.md, up to the next one.
func section(t *testing.T, heading string) string {
	t.Helper()
	doc := protocolDoc(t)
	i := strings.Index(doc, "\n## "+heading+"\n")
	if i < 0 {
		t.Fatalf("protocol.md has no section %q", heading)
	}
	rest := doc[i+len(heading)+5:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

var codeRowRE = regexp.MustCompile("(?m)^\\| `(-?[0-9]+)` \\| ([^|]+) \\|")

// tableCodes returns the codes in the first column of a section's table, with the second.
func tableCodes(t *testing.T, heading string) map[int]string {
	t.Helper()
	codes := map[int]string{}
	for _, m := range codeRowRE.FindAllStringSubmatch(section(t, heading), -1) {
		n, _ := strconv.Atoi(m[1])
		codes[n] = strings.TrimSpace(m[2])
	}
	if len(codes) == 0 {
		t.Fatalf("protocol.md: no codes under %q", heading)
	}
	return codes
}

// oneOfConsts returns a schema's oneOf constants with their titles.
func oneOfConsts(t *testing.T, doc map[string]any, schema string) map[int]string {
	t.Helper()
	codes := map[int]string{}
	alts, _ := at(doc, "components", "schemas", schema, "oneOf").([]any)
	for _, a := range alts {
		c, ok := at(a, "const").(float64)
		if !ok {
			t.Fatalf("asyncapi.yaml %s: an alternative without an integer const: %v", schema, a)
		}
		title, _ := at(a, "title").(string)
		desc, _ := at(a, "description").(string)
		if title == "" || desc == "" {
			t.Errorf("asyncapi.yaml %s %v: no title or description", schema, c)
		}
		codes[int(c)] = title
	}
	if len(codes) == 0 {
		t.Fatalf("asyncapi.yaml: no %s constants", schema)
	}
	return codes
}

func sortedKeys[V any](m map[int]V) []int { return slices.Sorted(maps.Keys(m)) }

// operation is one of asyncapi.yaml's operations, with the method its message carries.
type operation struct {
	name, action, method string
	request              bool // the message has an id: a request, with a reply
	replies              int
}

func operations(t *testing.T, doc map[string]any) []operation {
	t.Helper()
	ops, _ := at(doc, "operations").(map[string]any)
	var out []operation
	for _, name := range slices.Sorted(maps.Keys(ops)) {
		op := ops[name]
		msgs, _ := at(op, "messages").([]any)
		if len(msgs) != 1 {
			t.Fatalf("asyncapi.yaml operation %s: %d messages, want 1", name, len(msgs))
		}
		payload := deref(t, doc, at(deref(t, doc, msgs[0]), "payload"))
		method, _ := at(deref(t, doc, at(payload, "properties", "method")), "const").(string)
		if method == "" {
			t.Fatalf("asyncapi.yaml operation %s: its message's method is no const", name)
		}
		required, _ := at(payload, "required").([]any)
		replies, _ := at(op, "reply", "messages").([]any)
		out = append(out, operation{
			name: name, action: at(op, "action").(string), method: method,
			request: slices.Contains(required, any("id")), replies: len(replies),
		})
	}
	return out
}

// TestRealtimeMethods: asyncapi.yaml receives exactly the protocol table's Served methods, as
// requests or notifications as the table says, and sends exactly its Sent notifications;
// requests have replies, notifications none; protocol.md has an example of each method.
func TestRealtimeMethods(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	var receives, sends []string
	for _, op := range operations(t, doc) {
		switch op.action {
		case "receive":
			receives = append(receives, op.method)
			if m, ok := protocol.Lookup(op.method); ok && op.request == m.Notification {
				t.Errorf("asyncapi.yaml operation %s: request %v; in the protocol table %s is a notification: %v", op.name, op.request, op.method, m.Notification)
			}
		case "send":
			sends = append(sends, op.method)
			if op.request {
				t.Errorf("asyncapi.yaml operation %s: the gateway sends requests to no client", op.name)
			}
		default:
			t.Errorf("asyncapi.yaml operation %s: action %q", op.name, op.action)
		}
		if op.request != (op.replies > 0) {
			t.Errorf("asyncapi.yaml operation %s (%s): request %v with %d reply messages", op.name, op.method, op.request, op.replies)
		}
	}
	slices.Sort(receives)
	slices.Sort(sends)
	if want := protocol.Names(protocol.Served); !slices.Equal(receives, want) {
		t.Errorf("asyncapi.yaml receives %v; the protocol table's Served methods are %v", receives, want)
	}
	if want := protocol.Names(protocol.Sent); !slices.Equal(sends, want) {
		t.Errorf("asyncapi.yaml sends %v; the protocol table's Sent notifications are %v", sends, want)
	}
	all := protocol.Names(protocol.Served | protocol.Sent)
	var inProtocol []string
	for _, ex := range protocolExamples(t) {
		var m struct{ Method string }
		if err := json.Unmarshal([]byte(ex), &m); err != nil {
			t.Fatalf("protocol.md example %s: %v", ex, err)
		}
		if m.Method != "" && !slices.Contains(inProtocol, m.Method) {
			inProtocol = append(inProtocol, m.Method)
		}
	}
	slices.Sort(inProtocol)
	if !slices.Equal(inProtocol, all) {
		t.Errorf("protocol.md has examples of %v; the protocol table's methods are %v", inProtocol, all)
	}
}

// TestErrorCodes: the codes the gateway answers with (rpc's and protocol's) are exactly those
// of asyncapi.yaml's ErrorCode (titled with the same words) and of protocol.md's table (whose
// meaning starts with them).
func TestErrorCodes(t *testing.T) {
	server := serverErrorCodes()
	async := oneOfConsts(t, descriptions(t).AsyncAPI, "ErrorCode")
	proto := tableCodes(t, "Error codes")
	if !slices.Equal(sortedKeys(async), sortedKeys(server)) {
		t.Errorf("asyncapi.yaml ErrorCode has %v; rpc and protocol %v", sortedKeys(async), sortedKeys(server))
	}
	if !slices.Equal(sortedKeys(proto), sortedKeys(server)) {
		t.Errorf("protocol.md's error codes are %v; rpc's and protocol's %v", sortedKeys(proto), sortedKeys(server))
	}
	for code, name := range server {
		if async[code] != name {
			t.Errorf("%d: asyncapi.yaml title %q, the code's name %q", code, async[code], name)
		}
		if !strings.HasPrefix(proto[code], name) {
			t.Errorf("%d: protocol.md says %q, the code's name %q", code, proto[code], name)
		}
	}
}

// closedByOthers are the close codes the gateway's code does not name but its connections
// end with, and why.
var closedByOthers = map[int]string{}

// TestCloseCodes: every close code the gateway sends is in asyncapi.yaml's CloseCode (which the
// channel's x-close-codes names) and in protocol.md's table, and those list nothing else.
func TestCloseCodes(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	server := serverCloseCodes(t)
	// 1006 is never sent: it is what the metrics count when a peer vanished without a close.
	delete(server, int(wsStatus["StatusAbnormalClosure"]))
	// 1005 is never sent either: it is what a peer's close frame without a code reads as.
	delete(server, int(wsStatus["StatusNoStatusRcvd"]))
	for code, why := range closedByOthers {
		if _, dup := server[code]; dup {
			t.Errorf("closedByOthers lists %d, which the gateway now names itself", code)
		}
		server[code] = why
	}
	async := oneOfConsts(t, doc, "CloseCode")
	proto := tableCodes(t, "Close codes")
	if !slices.Equal(sortedKeys(async), sortedKeys(server)) {
		t.Errorf("asyncapi.yaml CloseCode has %v; the gateway closes with %v", sortedKeys(async), sortedKeys(server))
	}
	if !slices.Equal(sortedKeys(proto), sortedKeys(server)) {
		t.Errorf("protocol.md's close codes are %v; the gateway closes with %v", sortedKeys(proto), sortedKeys(server))
	}
	if ref := at(doc, "channels", "rpc", "x-close-codes", "$ref"); ref != "#/components/schemas/CloseCode" {
		t.Errorf("channel rpc x-close-codes: %v", ref)
	}
}

// sourceText is the non-test Go source of a package directory.
func sourceText(t *testing.T, dir string) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(src)
	}
	return b.String()
}

// TestSubprotocols: the channel is the gateway's /rpc, and its subprotocols are the codecs'.
func TestSubprotocols(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	ch := at(doc, "channels", "rpc")
	addr, _ := at(ch, "address").(string)
	if !strings.Contains(sourceText(t, "gateway"), strconv.Quote("GET "+addr)) {
		t.Errorf("channel address %q: the gateway serves no GET %s", addr, addr)
	}
	subs, _ := at(ch, "x-subprotocols").(map[string]any)
	if got, want := slices.Sorted(maps.Keys(subs)), []string{codec.NameJSON, codec.NameMsgPack}; !slices.Equal(got, want) {
		t.Fatalf("x-subprotocols %v, want %v", got, want)
	}
	for name, s := range subs {
		frames := "text"
		if codec.ByName(name).Binary() {
			frames = "binary"
		}
		if at(s, "frames") != frames {
			t.Errorf("x-subprotocols %s: frames %v, want %s", name, at(s, "frames"), frames)
		}
		if def := at(s, "default"); def != (name == codec.NameMsgPack) {
			t.Errorf("x-subprotocols %s: default %v", name, def)
		}
	}
	header := at(ch, "bindings", "ws", "headers", "properties", "Sec-WebSocket-Protocol")
	pattern, _ := at(header, "pattern").(string)
	re, err := regexp.Compile(pattern)
	if err != nil {
		t.Fatalf("Sec-WebSocket-Protocol pattern: %v", err)
	}
	for _, offer := range []string{codec.NameMsgPack, codec.NameJSON, codec.NameMsgPack + ", " + codec.NameJSON} {
		if !re.MatchString(offer) {
			t.Errorf("Sec-WebSocket-Protocol pattern %q refuses %q", pattern, offer)
		}
	}
}

// canonical re-marshals a JSON text with sorted keys, so equal messages compare equal.
func canonical(t *testing.T, v any) string {
	t.Helper()
	if s, ok := v.(string); ok {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

// TestRealtimeExamples: asyncapi.yaml's examples are exactly protocol.md's (whose MessagePack
// twins codec/docs_test.go checks), each a well-formed envelope, and every message has one.
func TestRealtimeExamples(t *testing.T) {
	doc := descriptions(t).AsyncAPI
	want := map[string]int{}
	for _, ex := range protocolExamples(t) {
		want[canonical(t, ex)]++
	}
	got := map[string]int{}
	msgs, _ := at(doc, "components", "messages").(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(msgs)) {
		exs, _ := at(msgs[name], "examples").([]any)
		if len(exs) == 0 {
			t.Errorf("asyncapi.yaml message %s has no example", name)
		}
		for _, ex := range exs {
			js := canonical(t, at(ex, "payload"))
			var m codec.Message
			if err := codec.JSON.Decode([]byte(js), &m); err != nil {
				t.Errorf("asyncapi.yaml message %s example %s: %v", name, js, err)
			}
			if at(ex, "name") == nil || at(ex, "summary") == nil {
				t.Errorf("asyncapi.yaml message %s example %s: no name or summary", name, js)
			}
			got[js]++
		}
	}
	for js, n := range want {
		if got[js] != n {
			t.Errorf("protocol.md's example %s appears %d times in asyncapi.yaml, want %d", js, got[js], n)
		}
	}
	for js := range got {
		if want[js] == 0 {
			t.Errorf("asyncapi.yaml's example %s is not in protocol.md", js)
		}
	}
}
