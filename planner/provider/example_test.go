package provider_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/ballet/gateway/planner/provider"
)

func ExampleScripted() {
	script, err := provider.ParseScript(strings.NewReader(`[
		{"match": "create", "steps": [[{"text": "Creating {{title}}."}, {"tool": "create_item", "input": {"title": "{{title}}"}}]],
		 "final": "Created: {{result}}"}
	]`))
	if err != nil {
		panic(err)
	}
	var p provider.Provider = provider.NewScripted(script)
	req := &provider.Request{Messages: []provider.Message{
		{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: "create Fix login"}}},
	}}
	resp, err := p.Stream(context.Background(), req, func(d provider.Delta) error {
		if d.Type == provider.DeltaToolCall {
			fmt.Printf("\ncall %s %s %s\n", d.ToolUseID, d.Name, d.Input)
		} else {
			fmt.Print(d.Text)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.StopReason)

	// The planner runs the tool and calls the model again with its result.
	req.Messages = append(req.Messages,
		provider.Message{Role: provider.RoleAssistant, Content: resp.Content},
		provider.Message{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockToolResult, ToolUseID: "toolu_scripted_1", Text: "WEB-7"}}},
	)
	resp, _ = p.Stream(context.Background(), req, func(provider.Delta) error { return nil })
	fmt.Println(resp.Content[0].Text, resp.StopReason)
	// Output:
	// Creating Fix login.
	// call toolu_scripted_1 create_item {"title":"Fix login"}
	// tool_use
	// Created: WEB-7 end_turn
}
