// Package provider is the planner's model layer: one Provider interface whose Stream
// sends a Request (system prompt, Anthropic-shaped messages, tools) and reports the
// model's output as Deltas while it is generated, then returns the whole Response.
//
// Implementations: NewAnthropic (Messages API, SSE), NewOpenAI (Chat Completions,
// also vLLM, Ollama and llama.cpp servers) and NewScripted (deterministic, for `dev`
// and tests). The HTTP providers retry connection failures, 429, 5xx and 529 with
// jittered exponential backoff that honours retry-after, but only before the first
// delta; later failures are returned. A context from WithRetryHook hears of each retry,
// for the caller's traces. Failures are *Error values (errors.As), broken
// streams wrap ErrMalformed, and no error text contains the API key. Stream starts no
// goroutine: deltas are delivered on the caller's goroutine.
//
// # Scripts
//
// A script is JSON: a list of rules, or an object {"chunk": 8, "chunk_pause_ms": 0,
// "rules": [...]} where chunk is the most characters one text delta carries and
// chunk_pause_ms the pause between pieces. A rule is
//
//	{"match": "create", "steps": [ROUND, ...], "final": "Done: {{result}}"}
//
// The round index of a call is the number of assistant messages since the last user
// message with text. The first rule whose match (case-insensitive substring of that
// message; "" matches all) fits and that has a step at that index is played. When none
// has, the call answers the first matching rule's final text (default "Done.") with
// end_turn. A ROUND is a list of actions, or {"actions": [...], "stop_reason": "..."}
// (default tool_use when it calls a tool, else end_turn). Actions:
//
//	{"text": "Hello", "chunk": 4}                     streamed in pieces
//	{"pause_ms": 50}                                  a pause that honours cancellation
//	{"tool": "create_item", "input": {"title": "x"}}  a tool_use block
//	{"error": "overloaded"}                           the call fails with an *Error
//
// Texts and the strings inside tool inputs expand {{message}} (the user's text),
// {{title}} (an item title taken from it, e.g. "Fix login" from "create an item called
// Fix login") and {{result}} (the tool results the call answers). DefaultScript is the
// script of `ballet-gateway dev`.
package provider
