package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner/provider"
	"github.com/ballet/gateway/tracker"
)

// maxListed is the most items list_items returns at once.
const maxListed = 100

// toolbox runs the planner's tools on the tracker of one session's project, for the human
// who sent the message and with that human's permissions, checked at every call.
type toolbox struct {
	svc     *Service
	trk     *tracker.Service
	project string
	actor   tracker.Actor
	defs    []provider.Tool
}

func newToolbox(s *Service, t *turn) *toolbox {
	return &toolbox{
		svc: s, trk: s.trk, project: t.session.Project,
		actor: tracker.Actor{Kind: tracker.ActorAgent, Subject: t.human},
		defs:  s.tools,
	}
}

// A tool's handler decodes its input and calls the tracker; the string is its result.
type toolFunc func(ctx context.Context, tb *toolbox, input []byte) (string, error)

type toolSpec struct {
	def provider.Tool
	run toolFunc
}

const keyProp = `{"type": "string", "description": "An item key of this project, like WEB-12."}`

// The tracker's limits in the schemas are placeholders named by the tracker's names of them,
// which toolDefs fills in with the limits of the Service's tracker: the model is told what the
// tracker takes. JSON Schema counts characters, so a description's bound in bytes is a
// maxLength it may not reach, and said in words too.
var (
	titleChars       = "{{" + tracker.LimitTitleChars + "}}"
	descriptionBytes = "{{" + tracker.LimitDescriptionBytes + "}}"
	titleProp        = `{"type": "string", "minLength": 1, "maxLength": ` + titleChars + `}`
	descriptionProp  = `{"type": "string", "maxLength": ` + descriptionBytes + `, "description": "At most ` + descriptionBytes + ` bytes of UTF-8."}`
)

var toolSpecs = []toolSpec{
	{provider.Tool{Name: "list_items", Description: "List the project's items, by number: key, title, state and the keys of the items blocking each. " +
		"Filter by state and by a text that must appear in the title or description (case-insensitive). At most 100 items are returned.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {
			"state": {"type": "string", "enum": ["backlog", "ready", "in_progress", "done"]},
			"query": {"type": "string", "description": "Text to search for in titles and descriptions."}},
			"additionalProperties": false}`)}, listItems},
	{provider.Tool{Name: "get_item", Description: "Get one item with its description, state, version and blockers.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": ` + keyProp + `}, "required": ["key"], "additionalProperties": false}`)}, getItem},
	{provider.Tool{Name: "create_item", Description: "Create an item in the project. The state defaults to backlog.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {
			"title": ` + titleProp + `,
			"description": ` + descriptionProp + `,
			"state": {"type": "string", "enum": ["backlog", "ready", "in_progress", "done"]}},
			"required": ["title"], "additionalProperties": false}`)}, createItem},
	{provider.Tool{Name: "update_item", Description: "Change an item's title and/or description.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": ` + keyProp + `,
			"title": ` + titleProp + `,
			"description": ` + descriptionProp + `},
			"required": ["key"], "additionalProperties": false}`)}, updateItem},
	{provider.Tool{Name: "set_state", Description: "Move an item to another state.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": ` + keyProp + `,
			"state": {"type": "string", "enum": ["backlog", "ready", "in_progress", "done"]}},
			"required": ["key", "state"], "additionalProperties": false}`)}, setState},
	{provider.Tool{Name: "add_dependency", Description: "Record that the item `blocker` blocks the item `key` (key cannot be done before blocker). Cycles are refused.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": ` + keyProp + `, "blocker": ` + keyProp + `},
			"required": ["key", "blocker"], "additionalProperties": false}`)}, addDependency},
	{provider.Tool{Name: "remove_dependency", Description: "Remove the record that the item `blocker` blocks the item `key`.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {"key": ` + keyProp + `, "blocker": ` + keyProp + `},
			"required": ["key", "blocker"], "additionalProperties": false}`)}, removeDependency},
}

// toolIndex is the tools' handlers by name.
var toolIndex = make(map[string]toolFunc, len(toolSpecs))

func init() {
	for _, t := range toolSpecs {
		toolIndex[t.def.Name] = t.run
	}
}

// toolDefs returns the definitions of the tools, with the tracker's limits l in their schemas.
func toolDefs(l tracker.Limits) []provider.Tool {
	limits := strings.NewReplacer(titleChars, strconv.Itoa(l.TitleChars), descriptionBytes, strconv.Itoa(l.DescriptionBytes))
	defs := make([]provider.Tool, len(toolSpecs))
	for i, t := range toolSpecs {
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(limits.Replace(string(t.def.InputSchema)))); err != nil {
			panic("planner: tool " + t.def.Name + " schema: " + err.Error())
		}
		defs[i] = t.def
		defs[i].InputSchema = compact.Bytes()
	}
	return defs
}

// Tools returns the definitions of the planner's tools, as the Service gives them to the
// model: their schemas bound titles and descriptions by its tracker's limits.
func (s *Service) Tools() []provider.Tool { return append([]provider.Tool(nil), s.tools...) }

// call runs one tool call and returns its result; failures are error results for the model.
func (tb *toolbox) call(ctx context.Context, c ToolCall) ToolResult {
	ctx, span := tb.startToolCall(ctx, c)
	r, errType := tb.run(ctx, c)
	endToolCall(span, r, errType)
	return r
}

// run runs one tool call; errType is the error.type of a call that failed.
func (tb *toolbox) run(ctx context.Context, c ToolCall) (r ToolResult, errType string) {
	r = ToolResult{ToolUseID: c.ID, Tool: c.Name}
	run := toolIndex[c.Name]
	if run == nil {
		r.IsError, r.Text = true, fmt.Sprintf("unknown tool %q", c.Name)
		return r, errTypeUnknownTool
	}
	// A started call completes even if the turn is cancelled meanwhile, so that its result
	// tells what happened to the tracker.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tb.svc.toolTimeout)
	defer cancel()
	text, err := run(cctx, tb, c.Input)
	if err != nil {
		r.IsError, r.Text = true, tb.errorText(c.Name, err)
		return r, toolErrorType(err)
	}
	r.Text = text
	return r, ""
}

// inputError is a tool input the tool cannot use.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func (tb *toolbox) errorText(tool string, err error) string {
	var ie *inputError
	if errors.As(err, &ie) {
		return "invalid input: " + ie.msg
	}
	if d := fault.Detail(err); d != "" {
		return d
	}
	tb.svc.logger.Error("planner: tool failed", "tool", tool, "project", tb.project, "err", err)
	return "the tracker could not complete the request"
}

// decode reads a tool's input strictly into v; an empty input is {}.
func decode(input []byte, v any) error {
	in := bytes.TrimSpace(input)
	if len(in) == 0 || string(in) == "null" {
		in = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &inputError{strings.TrimPrefix(err.Error(), "json: ")}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &inputError{"more than one JSON value"}
	}
	return nil
}

// key checks that an item key is in the session's project.
func (tb *toolbox) key(field, key string) error {
	if key == "" {
		return &inputError{field + " is required"}
	}
	p, _, ok := tracker.ParseItemKey(key)
	if !ok {
		return &inputError{fmt.Sprintf("%s %q is not an item key like %s-12", field, key, tb.project)}
	}
	if p != tb.project {
		return &inputError{fmt.Sprintf("item %s is not in project %s", key, tb.project)}
	}
	return nil
}

func itemText(it *tracker.Item) (string, error) {
	b, err := json.Marshal(it)
	return string(b), err
}

type listedItem struct {
	Key       string   `json:"key"`
	Title     string   `json:"title"`
	State     string   `json:"state"`
	BlockedBy []string `json:"blocked_by"`
}

func listItems(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	var in struct {
		State string `json:"state"`
		Query string `json:"query"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	out := struct {
		Items []listedItem `json:"items"`
		Total int          `json:"total"`
		More  bool         `json:"more,omitempty"`
	}{Items: []listedItem{}}
	// Page by page, so that a large project is never held whole; the rest is only counted.
	page := tracker.ItemPage{Limit: maxListed}
	for {
		list, err := tb.trk.ListItems(ctx, tb.actor, tb.project, tracker.ItemFilter{State: in.State, Query: in.Query}, page)
		if err != nil {
			return "", err
		}
		out.Total += len(list.Items)
		for i := range list.Items {
			if len(out.Items) == maxListed {
				out.More = true
				break
			}
			it := &list.Items[i]
			bb := it.BlockedBy
			if bb == nil {
				bb = []string{}
			}
			out.Items = append(out.Items, listedItem{it.Key, it.Title, it.State, bb})
		}
		if list.Next == 0 {
			break
		}
		page.After = list.Next
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func getItem(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	var in struct {
		Key string `json:"key"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	if err := tb.key("key", in.Key); err != nil {
		return "", err
	}
	it, err := tb.trk.GetItem(ctx, tb.actor, in.Key)
	if err != nil {
		return "", err
	}
	return itemText(it)
}

func createItem(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	var in struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		State       string `json:"state"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	it, err := tb.trk.CreateItem(ctx, tb.actor, tb.project, tracker.ItemInput{Title: in.Title, Description: in.Description, State: in.State})
	if err != nil {
		return "", err
	}
	return itemText(it)
}

func updateItem(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	var in struct {
		Key         string  `json:"key"`
		Title       *string `json:"title"`
		Description *string `json:"description"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	if err := tb.key("key", in.Key); err != nil {
		return "", err
	}
	if in.Title == nil && in.Description == nil {
		return "", &inputError{"give a title, a description or both"}
	}
	it, err := tb.trk.UpdateItem(ctx, tb.actor, in.Key, tracker.ItemPatch{Title: in.Title, Description: in.Description}, nil)
	if err != nil {
		return "", err
	}
	return itemText(it)
}

func setState(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	var in struct {
		Key   string `json:"key"`
		State string `json:"state"`
	}
	if err := decode(input, &in); err != nil {
		return "", err
	}
	if err := tb.key("key", in.Key); err != nil {
		return "", err
	}
	if in.State == "" {
		return "", &inputError{"state is required"}
	}
	it, err := tb.trk.UpdateItem(ctx, tb.actor, in.Key, tracker.ItemPatch{State: &in.State}, nil)
	if err != nil {
		return "", err
	}
	return itemText(it)
}

type dependencyInput struct {
	Key     string `json:"key"`
	Blocker string `json:"blocker"`
}

func (tb *toolbox) dependency(input []byte) (dependencyInput, error) {
	var in dependencyInput
	if err := decode(input, &in); err != nil {
		return in, err
	}
	if err := tb.key("key", in.Key); err != nil {
		return in, err
	}
	return in, tb.key("blocker", in.Blocker)
}

func addDependency(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	in, err := tb.dependency(input)
	if err != nil {
		return "", err
	}
	it, _, err := tb.trk.AddDependency(ctx, tb.actor, in.Key, in.Blocker)
	if err != nil {
		return "", err
	}
	return itemText(it)
}

func removeDependency(ctx context.Context, tb *toolbox, input []byte) (string, error) {
	in, err := tb.dependency(input)
	if err != nil {
		return "", err
	}
	it, err := tb.trk.RemoveDependency(ctx, tb.actor, in.Key, in.Blocker)
	if err != nil {
		return "", err
	}
	return itemText(it)
}
