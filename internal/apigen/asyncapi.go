package apigen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// The four places of asyncapi.yaml that hold generated text, each between a line "# generated:
// <place>" and a line "# end generated: <place>" (indented as the place's entries).
var places = []string{"channel messages", "operations", "messages", "schemas"}

// AsyncAPI returns asyncapi.yaml (doc) with its generated places written afresh: an operation,
// its messages and their schemas for each method of the protocol table that the hand-written
// text does not describe, with the examples protocol.md (protocolMD) gives of it.
func AsyncAPI(doc, protocolMD []byte, protocolDir string) ([]byte, error) {
	docs, err := readDocs(protocolDir)
	if err != nil {
		return nil, err
	}
	hand, err := stripGenerated(doc)
	if err != nil {
		return nil, err
	}
	a := &asyncGen{docs: docs, hand: string(hand), out: map[string]*bytes.Buffer{}, done: map[string]bool{}}
	for _, p := range places {
		a.out[p] = &bytes.Buffer{}
	}
	examples, err := mdExamples(protocolMD)
	if err != nil {
		return nil, err
	}
	for _, name := range protocol.Names(protocol.Served | protocol.Sent) {
		if !strings.Contains(a.hand, "const: "+name+"\n") {
			m, _ := protocol.Lookup(name)
			a.method(m, examples)
		}
	}
	return a.fill(doc)
}

type asyncGen struct {
	docs docs
	hand string                   // the document without its generated places
	out  map[string]*bytes.Buffer // by place
	done map[string]bool          // schemas written
}

func (a *asyncGen) method(m protocol.Method, examples []example) {
	op := camel(m.Name)
	request := m.Dir&protocol.Served != 0 && !m.Notification
	action := "receive"
	if m.Dir&protocol.Served == 0 {
		action = "send"
	}
	msg, schema := op, upper(op)+"Notification"
	if request {
		msg, schema = op+"Request", upper(op)+"Request"
	}
	w := a.out["channel messages"]
	fmt.Fprintf(w, "      %s:\n        $ref: '#/components/messages/%s'\n", msg, msg)
	if request {
		fmt.Fprintf(w, "      %sResult:\n        $ref: '#/components/messages/%sResult'\n", op, op)
	}

	w = a.out["operations"]
	fmt.Fprintf(w, "  %s:\n    action: %s\n    channel:\n      $ref: '#/channels/rpc'\n    title: %s\n    summary: %s\n",
		op, action, m.Name, quote(m.Summary))
	fmt.Fprintf(w, "    messages:\n      - $ref: '#/channels/rpc/messages/%s'\n", msg)
	if request {
		fmt.Fprintf(w, "    reply:\n      channel:\n        $ref: '#/channels/rpc'\n      messages:\n"+
			"        - $ref: '#/channels/rpc/messages/%sResult'\n        - $ref: '#/channels/rpc/messages/errorResponse'\n", op)
	}

	var mine, results []example
	for _, ex := range examples {
		if ex.Method == m.Name {
			mine = append(mine, ex)
		}
	}
	if request {
		// A result answers the last request before it with its id.
		for i, ex := range examples {
			if ex.Method != "" || !ex.HasResult {
				continue
			}
			for j := i - 1; j >= 0; j-- {
				if r := examples[j]; r.Method != "" && bytes.Equal(r.ID, ex.ID) {
					if r.Method == m.Name {
						results = append(results, ex)
					}
					break
				}
			}
		}
	}
	a.message(msg, m.Name, m.Name+map[bool]string{true: " request", false: ""}[request], schema, mine)
	if request {
		a.message(op+"Result", m.Name, m.Name+" result", upper(op)+"Response", results)
	}

	w = a.out["schemas"]
	required := []string{"jsonrpc", "method", "params"}
	if request {
		required = []string{"jsonrpc", "id", "method", "params"}
	}
	fmt.Fprintf(w, "    %s:\n      type: object\n      required:\n", schema)
	for _, r := range required {
		fmt.Fprintf(w, "        - %s\n", r)
	}
	fmt.Fprintf(w, "      properties:\n        jsonrpc:\n          $ref: '#/components/schemas/Version'\n")
	if request {
		fmt.Fprintf(w, "        id:\n          $ref: '#/components/schemas/RequestId'\n")
	}
	fmt.Fprintf(w, "        method:\n          const: %s\n        params:\n          $ref: '#/components/schemas/%s'\n",
		m.Name, m.Params.Name())
	if request {
		fmt.Fprintf(w, "    %sResponse:\n      type: object\n      required:\n        - jsonrpc\n        - id\n        - result\n"+
			"      properties:\n        jsonrpc:\n          $ref: '#/components/schemas/Version'\n"+
			"        id:\n          $ref: '#/components/schemas/RequestId'\n"+
			"        result:\n          $ref: '#/components/schemas/%s'\n", upper(op), m.Result.Name())
	}
	a.schema(m.Params, m.Dir&protocol.Served != 0)
	if request {
		a.schema(m.Result, false)
	}
}

func (a *asyncGen) message(name, method, title, schema string, examples []example) {
	w := a.out["messages"]
	fmt.Fprintf(w, "    %s:\n      name: %s\n      title: %s\n      payload:\n        $ref: '#/components/schemas/%s'\n",
		name, method, title, schema)
	if len(examples) == 0 {
		return
	}
	fmt.Fprintf(w, "      examples:\n")
	for i, ex := range examples {
		fmt.Fprintf(w, "        - name: %s\n          summary: %s\n          payload: %s\n",
			quote(fmt.Sprintf("%s %d", title, i+1)), quote(ex.Summary), ex.JSON)
	}
}

// schema writes the schema of a struct type named as the Go type, and of the structs it holds,
// unless the hand-written text or an earlier method has it. params: a request's params, which
// may carry _meta.
func (a *asyncGen) schema(t reflect.Type, params bool) {
	name := t.Name()
	if a.done[name] || strings.Contains(a.hand, "\n    "+name+":\n") {
		return
	}
	a.done[name] = true
	w := a.out["schemas"]
	fields := protocol.Fields(t)
	fmt.Fprintf(w, "    %s:\n", name)
	if d := a.docs.types[name]; d != "" {
		fmt.Fprintf(w, "      description: %s\n", quote(d+"."))
	}
	fmt.Fprintf(w, "      type: object\n")
	var required []string
	for _, f := range fields {
		if !f.Optional {
			required = append(required, f.Name)
		}
	}
	if len(required) > 0 {
		fmt.Fprintf(w, "      required:\n")
		for _, r := range required {
			fmt.Fprintf(w, "        - %s\n", r)
		}
	}
	if len(fields) == 0 && !params {
		fmt.Fprintf(w, "      additionalProperties: false\n")
	}
	if len(fields) == 0 && !params {
		return
	}
	fmt.Fprintf(w, "      properties:\n")
	if params {
		fmt.Fprintf(w, "        _meta:\n          $ref: '#/components/schemas/TraceMeta'\n")
	}
	var nested []reflect.Type
	for _, f := range fields {
		fmt.Fprintf(w, "        %s:\n", f.Name)
		if d := a.docs.fields[f.Name+" "+fieldOwner(t, f.Name)]; d != "" {
			fmt.Fprintf(w, "          description: %s\n", quote(d))
		}
		ft, nullable := f.Type, false
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			nullable = !f.Optional && ft.Kind() != reflect.Struct
		}
		switch {
		case ft == reflect.TypeFor[codec.RawJSON]():
			fmt.Fprintf(w, "          type: object\n")
		case ft.Kind() == reflect.Struct:
			fmt.Fprintf(w, "          $ref: '#/components/schemas/%s'\n", ft.Name())
			nested = append(nested, ft)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			fmt.Fprintf(w, "          type: array\n          items:\n            $ref: '#/components/schemas/%s'\n", ft.Elem().Name())
			nested = append(nested, ft.Elem())
		case ft.Kind() == reflect.Slice:
			fmt.Fprintf(w, "          type: array\n          items:\n            type: %s\n", jsonSchemaType(ft.Elem()))
		default:
			if nullable {
				fmt.Fprintf(w, "          type:\n            - %s\n            - 'null'\n", jsonSchemaType(ft))
			} else {
				fmt.Fprintf(w, "          type: %s\n", jsonSchemaType(ft))
			}
			if f.Enum != nil {
				fmt.Fprintf(w, "          enum:\n")
				for _, e := range f.Enum {
					fmt.Fprintf(w, "            - %s\n", e)
				}
			}
		}
	}
	for _, n := range nested {
		a.schema(n, false)
	}
}

func jsonSchemaType(t reflect.Type) string {
	s, ok := scalar(t)
	if !ok {
		panic(fmt.Sprintf("apigen: no JSON Schema type for %s", t))
	}
	return s
}

// scalar is the JSON Schema type of a Go string, bool or integer.
func scalar(t reflect.Type) (string, bool) {
	switch t.Kind() {
	case reflect.String:
		return "string", true
	case reflect.Bool:
		return "boolean", true
	case reflect.Int, reflect.Int64:
		return "integer", true
	}
	return "", false
}

// fill writes the generated text into doc's places.
func (a *asyncGen) fill(doc []byte) ([]byte, error) {
	out := string(doc)
	for _, p := range places {
		begin, end := "# generated: "+p+"\n", "# end generated: "+p+"\n"
		i := strings.Index(out, begin)
		j := strings.Index(out, end)
		if i < 0 || j < i {
			return nil, fmt.Errorf("apigen: asyncapi.yaml has no place %q (lines %q and %q)", p, strings.TrimSpace(begin), strings.TrimSpace(end))
		}
		// The end line's indentation is kept: it is what precedes it on its line.
		k := strings.LastIndexByte(out[:j], '\n') + 1
		out = out[:i+len(begin)] + a.out[p].String() + out[k:]
	}
	return []byte(out), nil
}

// stripGenerated returns doc without the text of its generated places.
func stripGenerated(doc []byte) ([]byte, error) {
	out := string(doc)
	for _, p := range places {
		begin, end := "# generated: "+p+"\n", "# end generated: "+p+"\n"
		i, j := strings.Index(out, begin), strings.Index(out, end)
		if i < 0 || j < i {
			return nil, fmt.Errorf("apigen: asyncapi.yaml has no place %q", p)
		}
		k := strings.LastIndexByte(out[:j], '\n') + 1
		out = out[:i+len(begin)] + out[k:]
	}
	return []byte(out), nil
}

// example is one of protocol.md's JSON examples.
type example struct {
	JSON      string // on one line, as written
	Method    string
	ID        json.RawMessage
	HasResult bool
	Summary   string // the sentence before it, or its method's
	at        int
}

var mdExampleRE = regexp.MustCompile("(?s)```json\n(.*?)\n```")

func mdExamples(md []byte) ([]example, error) {
	var out []example
	for i, m := range mdExampleRE.FindAllSubmatchIndex(md, -1) {
		js := string(md[m[2]:m[3]])
		var e struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			return nil, fmt.Errorf("apigen: protocol.md example %s: %w", js, err)
		}
		out = append(out, example{JSON: js, Method: e.Method, ID: e.ID, HasResult: e.Result != nil,
			Summary: lastSentence(string(md[:m[0]])), at: i})
	}
	return out, nil
}

// lastSentence is the last sentence of the paragraph just before an example, as its summary.
func lastSentence(before string) string {
	lines := strings.Split(strings.TrimRight(before, "\n"), "\n")
	var para []string
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "```") || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "|") {
			break
		}
		para = append([]string{l}, para...)
	}
	text := strings.TrimSuffix(strings.Join(para, " "), ":")
	if text == "" {
		return "An example from protocol.md."
	}
	if i := strings.LastIndex(text, ". "); i >= 0 {
		text = text[i+2:]
	}
	return strings.TrimSuffix(text, ".") + "."
}

func quote(s string) string { return strconv.Quote(s) }

// camel is a method name as asyncapi.yaml names its operation: system.ping → systemPing.
func camel(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			up = b.Len() > 0
			continue
		}
		if up {
			r = unicode.ToUpper(r)
		}
		b.WriteRune(r)
		up = false
	}
	return b.String()
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
