package provider

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func mustParse(t *testing.T, js string) *Script {
	t.Helper()
	s, err := ParseScript(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runTurn plays a whole planner turn against p: each tool call is answered with
// result(name, input) until the model stops calling tools.
func runTurn(t *testing.T, p Provider, msgs []Message, result func(name string, input json.RawMessage) string) ([]Message, []Delta) {
	t.Helper()
	var all []Delta
	for range 10 {
		deltas, resp, err := collect(context.Background(), p, &Request{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, deltas...)
		msgs = append(msgs, Message{Role: RoleAssistant, Content: resp.Content})
		if resp.StopReason != StopToolUse {
			return msgs, all
		}
		var results []Block
		for _, b := range resp.Content {
			if b.Type == BlockToolUse {
				results = append(results, Block{Type: BlockToolResult, ToolUseID: b.ToolUseID, Text: result(b.Name, b.Input)})
			}
		}
		msgs = append(msgs, Message{Role: RoleUser, Content: results})
	}
	t.Fatal("turn did not end")
	return nil, nil
}

func TestScriptedRulesAndRounds(t *testing.T) {
	s := mustParse(t, `{"chunk": 3, "rules": [
		{"match": "DEPLOY", "steps": [
			[{"text": "Step one."}, {"tool": "create_item", "input": {"title": "{{title}}", "n": 1.50, "tags": ["{{message}}"]}}],
			{"actions": [{"tool": "list_items"}, {"tool": "list_items"}], "stop_reason": "tool_use"}
		], "final": "Finished with {{result}}."},
		{"match": "", "steps": [[{"text": "Hi"}]]}
	]}`)
	p := NewScripted(s)
	if p.Name() != "scripted" {
		t.Fatal(p.Name())
	}
	msgs, deltas := runTurn(t, p, []Message{userText("please deploy the app")}, func(name string, _ json.RawMessage) string { return "ok-" + name })

	var kinds []string
	for _, d := range deltas {
		if d.Type == DeltaText {
			if n := utf8.RuneCountInString(d.Text); n > 3 {
				t.Errorf("text piece %q longer than chunk", d.Text)
			}
			continue
		}
		kinds = append(kinds, d.ToolUseID+":"+d.Name+":"+string(d.Input))
	}
	wantKinds := []string{
		`toolu_scripted_1:create_item:{"n":1.50,"tags":["please deploy the app"],"title":"deploy the app"}`,
		"toolu_scripted_2:list_items:{}",
		"toolu_scripted_3:list_items:{}",
	}
	if !reflect.DeepEqual(kinds, wantKinds) {
		t.Errorf("tool calls %q", kinds)
	}
	if got := textOfDeltas(deltas); got != "Step one.Finished with ok-list_items\nok-list_items." {
		t.Errorf("text %q", got)
	}
	// user, assistant (round 0), results, assistant (round 1), results, assistant (final)
	if len(msgs) != 6 {
		t.Fatalf("%d messages", len(msgs))
	}
	if last := msgs[5].Content; len(last) != 1 || last[0].Type != BlockText {
		t.Errorf("final %+v", last)
	}

	// Another message: the catch-all answers, then its rounds are used up.
	_, deltas = runTurn(t, p, append(msgs, userText("thanks")), nil)
	if got := textOfDeltas(deltas); got != "Hi" {
		t.Errorf("catch-all said %q", got)
	}
}

func TestScriptedFinalWithoutRules(t *testing.T) {
	p := NewScripted(mustParse(t, `[]`))
	deltas, resp, err := collect(context.Background(), p, hi())
	if err != nil || textOfDeltas(deltas) != "Done." || resp.StopReason != StopEndTurn {
		t.Fatalf("%v %+v %+v", err, deltas, resp)
	}
	if resp.Usage.InputTokens == 0 || resp.Usage.OutputTokens == 0 {
		t.Errorf("usage %+v", resp.Usage)
	}
}

func TestScriptedStopReasonAndBlocks(t *testing.T) {
	p := NewScripted(mustParse(t, `[{"steps": [{"actions": [{"text": "a"}, {"text": "b"}, {"tool": "t"}, {"text": "c"}], "stop_reason": "max_tokens"}]}]`))
	_, resp, err := collect(context.Background(), p, hi())
	if err != nil {
		t.Fatal(err)
	}
	want := &Response{StopReason: StopMaxTokens, Content: []Block{
		{Type: BlockText, Text: "ab"},
		{Type: BlockToolUse, ToolUseID: "toolu_scripted_1", Name: "t", Input: json.RawMessage(`{}`)},
		{Type: BlockText, Text: "c"},
	}, Usage: resp.Usage}
	if !reflect.DeepEqual(resp, want) {
		t.Fatalf("response %+v", resp)
	}
}

func TestScriptedChunksKeepCharacters(t *testing.T) {
	text := "héllo wörld — ünïcode ✓"
	p := NewScripted(mustParse(t, `[{"steps": [[{"text": "`+text+`", "chunk": 2}]]}]`))
	deltas, _, err := collect(context.Background(), p, hi())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range deltas {
		if !utf8.ValidString(d.Text) || utf8.RuneCountInString(d.Text) > 2 {
			t.Fatalf("piece %q", d.Text)
		}
	}
	if textOfDeltas(deltas) != text {
		t.Fatalf("text %q", textOfDeltas(deltas))
	}
}

func TestScriptedPauseHonoursCancel(t *testing.T) {
	p := NewScripted(mustParse(t, `[{"steps": [[{"text": "before"}, {"pause_ms": 3600000}, {"text": "after"}]]}]`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	_, err := p.Stream(ctx, hi(), func(d Delta) error {
		got = append(got, d.Text)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || strings.Join(got, "") != "before" {
		t.Fatalf("err %v, deltas %q", err, got)
	}

	p = NewScripted(mustParse(t, `{"chunk": 1, "chunk_pause_ms": 3600000, "rules": [{"steps": [[{"text": "abc"}]]}]}`))
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	got = nil
	_, err = p.Stream(ctx, hi(), func(d Delta) error {
		got = append(got, d.Text)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || strings.Join(got, "") != "a" {
		t.Fatalf("err %v, deltas %q", err, got)
	}

	if _, err := p.Stream(ctx, hi(), func(Delta) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before start: %v", err)
	}
}

func TestScriptedErrorAction(t *testing.T) {
	p := NewScripted(mustParse(t, `[{"steps": [[{"text": "partial"}, {"error": "model exploded on {{message}}"}]]}]`))
	deltas, resp, err := collect(context.Background(), p, hi())
	var pe *Error
	if !errors.As(err, &pe) || pe.Provider != "scripted" || pe.Message != "model exploded on hi" || pe.Retryable || resp != nil {
		t.Fatalf("err = %#v", err)
	}
	if textOfDeltas(deltas) != "partial" {
		t.Fatalf("deltas %+v", deltas)
	}
}

func TestScriptedCallbackError(t *testing.T) {
	stop := errors.New("stop")
	p := NewScripted(mustParse(t, `[{"steps": [[{"tool": "x"}, {"text": "never"}]]}]`))
	if _, err := p.Stream(context.Background(), hi(), func(Delta) error { return stop }); err != stop {
		t.Fatalf("err = %v", err)
	}
}

func TestDefaultScript(t *testing.T) {
	p := NewScripted(nil)
	var created []string
	result := func(name string, input json.RawMessage) string {
		switch name {
		case "create_item":
			var in struct{ Title string }
			if err := json.Unmarshal(input, &in); err != nil {
				t.Fatal(err)
			}
			created = append(created, in.Title)
			return "created WEB-1 " + in.Title
		case "list_items":
			return "WEB-1 Fix login bug"
		}
		t.Fatalf("unexpected tool %s", name)
		return ""
	}

	_, deltas := runTurn(t, p, []Message{userText("hello there")}, result)
	if got := textOfDeltas(deltas); !strings.HasPrefix(got, "Hello!") {
		t.Errorf("greeting %q", got)
	}

	_, deltas = runTurn(t, p, []Message{userText("Please create an item called Fix login bug.")}, result)
	if !reflect.DeepEqual(created, []string{"Fix login bug"}) {
		t.Errorf("created %q", created)
	}
	if got := textOfDeltas(deltas); !strings.Contains(got, "Done. The tracker answered: created WEB-1 Fix login bug") {
		t.Errorf("report %q", got)
	}

	_, _ = runTurn(t, p, []Message{userText(`add "Write docs" to the backlog`)}, result)
	if len(created) != 2 || created[1] != "Write docs" {
		t.Errorf("created %q", created)
	}

	_, deltas = runTurn(t, p, []Message{userText("list everything")}, result)
	var tools []string
	for _, d := range deltas {
		if d.Type == DeltaToolCall {
			tools = append(tools, d.Name)
		}
	}
	if !reflect.DeepEqual(tools, []string{"list_items"}) || !strings.Contains(textOfDeltas(deltas), "WEB-1 Fix login bug") {
		t.Errorf("list turn: tools %q text %q", tools, textOfDeltas(deltas))
	}
}

func TestExtractTitle(t *testing.T) {
	tests := map[string]string{
		"create Fix login bug":                     "Fix login bug",
		"Please create an item called Fix login.":  "Fix login",
		"Add a task: write docs!":                  "write docs",
		`create "Ship v2" now`:                     "Ship v2",
		"add “Curly quotes” please":                "Curly quotes",
		"CREATE a new issue titled Crash on start": "Crash on start",
		"create":                             "Untitled item",
		"make something":                     "make something",
		"create " + strings.Repeat("x", 300): strings.Repeat("x", 200),
	}
	for in, want := range tests {
		if got := extractTitle(in); got != want {
			t.Errorf("extractTitle(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseScriptErrors(t *testing.T) {
	tests := map[string]string{
		"not json":          `{`,
		"unknown field":     `[{"match": "x", "stepz": []}]`,
		"unknown action":    `[{"steps": [[{"say": "x"}]]}]`,
		"two kinds":         `[{"steps": [[{"text": "x", "tool": "y"}]]}]`,
		"empty action":      `[{"steps": [[{}]]}]`,
		"negative pause":    `[{"steps": [[{"pause_ms": -1}]]}]`,
		"input not object":  `[{"steps": [[{"tool": "t", "input": [1]}]]}]`,
		"input on text":     `[{"steps": [[{"text": "t", "input": {}}]]}]`,
		"chunk on tool":     `[{"steps": [[{"tool": "t", "chunk": 2}]]}]`,
		"negative chunk":    `{"chunk": -1, "rules": []}`,
		"trailing data":     `[] []`,
		"round not a list":  `[{"steps": ["text"]}]`,
		"unknown round key": `[{"steps": [{"actions": [], "stop": "x"}]}]`,
	}
	for name, js := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseScript(strings.NewReader(js)); !errors.Is(err, ErrInvalidScript) {
				t.Fatalf("err = %v, want ErrInvalidScript", err)
			}
		})
	}
}

func TestLoadScript(t *testing.T) {
	path := filepath.Join(t.TempDir(), "planner.json")
	if err := os.WriteFile(path, []byte(`[{"match": "ping", "steps": [[{"text": "pong"}]]}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	deltas, _, err := collect(context.Background(), NewScripted(s), &Request{Messages: []Message{userText("PING")}})
	if err != nil || textOfDeltas(deltas) != "pong" {
		t.Fatalf("%v %+v", err, deltas)
	}
	if _, err := LoadScript(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("missing file: want an error")
	}
}
