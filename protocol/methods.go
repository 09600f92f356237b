package protocol

import (
	"reflect"
	"slices"

	"github.com/ballet/gateway/codec"
)

// The methods of the realtime API.
const (
	Auth              = "auth"
	AuthRefresh       = "auth.refresh"
	Heartbeat         = "$/heartbeat"
	SystemPing        = "system.ping"
	StreamSubscribe   = "stream.subscribe"
	StreamUnsubscribe = "stream.unsubscribe"
	StreamEvent       = "stream.event"
	StreamClosed      = "stream.closed"
	PresenceGet       = "presence.get"
	PresenceChanged   = "presence.changed"
	PlannerSend       = "planner.send"
	PlannerCancel     = "planner.cancel"
	PlannerWatch      = "planner.watch"
	PlannerOutput     = "planner.output"
)

// Direction says which side sends a method; a method may go both ways.
type Direction uint8

const (
	// Served: a client sends it and the gateway serves it (asyncapi.yaml's receive).
	Served Direction = 1 << iota
	// Sent: the gateway sends it to clients, always as a notification (asyncapi.yaml's send).
	Sent
)

// Method is one entry of the table.
type Method struct {
	Name string
	Dir  Direction
	// Notification: a client sends it without an id and gets no answer. A served method
	// that is not one is a request, answered with a result or an error.
	Notification bool
	// Params is the params' Go type and Result the result's (requests only; nil otherwise):
	// the gateway decodes and answers them, the Go client sends and reads them, and the
	// documents and the browser client's declarations are held against them.
	Params, Result reflect.Type
	// Summary says what the method does, in one sentence.
	Summary string
}

var table = [...]Method{
	{Name: Auth, Dir: Served, Params: typ[AuthParams](), Result: typ[AuthResult](),
		Summary: "Authenticate the connection; the first message."},
	{Name: AuthRefresh, Dir: Served, Params: typ[AuthParams](), Result: typ[AuthResult](),
		Summary: "A new token for the same subject, before `expires_at`."},
	{Name: Heartbeat, Dir: Served | Sent, Notification: true, Params: typ[HeartbeatParams](),
		Summary: "Liveness, both ways, every heartbeat interval; three silent intervals end the connection."},
	{Name: SystemPing, Dir: Served, Params: typ[PingParams](), Result: typ[PingResult](),
		Summary: "Checks the connection end to end."},
	{Name: StreamSubscribe, Dir: Served, Params: typ[SubscribeParams](), Result: typ[SubscribeResult](),
		Summary: "Subscribe to a change stream, optionally replaying from `from_seq`."},
	{Name: StreamUnsubscribe, Dir: Served, Params: typ[UnsubscribeParams](), Result: typ[Empty](),
		Summary: "End a stream subscription or a planner watch; an unknown id is `-32004`."},
	{Name: StreamEvent, Dir: Sent, Notification: true, Params: typ[EventParams](),
		Summary: "One event of a subscription, in seq order."},
	{Name: StreamClosed, Dir: Sent, Notification: true, Params: typ[ClosedParams](),
		Summary: "The gateway ended a subscription or a planner watch; its id is free again."},
	{Name: PresenceGet, Dir: Served, Params: typ[PresenceGetParams](), Result: typ[PresenceGetResult](),
		Summary: "Who is present on a stream now, the same on every replica (an extension)."},
	{Name: PresenceChanged, Dir: Sent, Notification: true, Params: typ[PresenceChangedParams](),
		Summary: "Who joined and who left a stream, to its presence subscriptions (an extension)."},
	{Name: PlannerSend, Dir: Served, Params: typ[SendParams](), Result: typ[SendResult](),
		Summary: "Store the human's message and start the planner's turn in the background."},
	{Name: PlannerCancel, Dir: Served, Params: typ[CancelParams](), Result: typ[Empty](),
		Summary: "Stop the session's running turn, wherever it runs."},
	{Name: PlannerWatch, Dir: Served, Params: typ[WatchParams](), Result: typ[WatchResult](),
		Summary: "Deliver a session's output as `planner.output` until `stream.unsubscribe`."},
	{Name: PlannerOutput, Dir: Sent, Notification: true, Params: typ[OutputParams](),
		Summary: "Live output of a planner turn, to every watcher of the session."},
}

// typ is reflect.TypeFor, short for the table.
func typ[T any]() reflect.Type { return reflect.TypeFor[T]() }

var byName = func() map[string]Method {
	m := make(map[string]Method, len(table))
	for _, e := range table {
		m[e.Name] = e
	}
	return m
}()

// Lookup returns the table's entry for the method name.
func Lookup(name string) (Method, bool) {
	m, ok := byName[name]
	return m, ok
}

// Names returns, sorted, the names of the methods that go in any of the directions d.
func Names(d Direction) []string {
	var out []string
	for _, m := range table {
		if m.Dir&d != 0 {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// The params and results of the methods, as they go on the wire: the gateway decodes and
// encodes these, the Go client too, and the documents' tests hold asyncapi.yaml and the browser
// client's declarations (generated from them) against them. Field names are the JSON keys, and
// MessagePack's too. Optional fields a client sends are omitempty, so that a message carries
// only what it says; an enum tag lists the values a string takes.

// AuthParams is auth's and auth.refresh's params.
type AuthParams struct {
	Token string `json:"token"` // an OIDC access token (JWT)
}

// AuthResult is auth's and auth.refresh's result.
type AuthResult struct {
	Subject   string  `json:"subject"`
	ExpiresAt int64   `json:"expires_at"` // the token's expiry, Unix seconds
	Limits    *Limits `json:"limits"`     // what the server allows; absent from older servers
}

// HeartbeatParams is $/heartbeat's params, both ways.
type HeartbeatParams struct {
	Time int64 `json:"time"` // the sender's clock, Unix milliseconds
}

// PingParams is system.ping's params: none.
type PingParams struct{}

// PingResult is system.ping's result.
type PingResult struct {
	Time    int64  `json:"time"` // the server's clock, Unix milliseconds
	Subject string `json:"subject"`
}

// SubscribeParams is stream.subscribe's params.
type SubscribeParams struct {
	Subscription string   `json:"subscription"` // 1–64 characters, unique on the connection
	Stream       string   `json:"stream"`       // project:<KEY> or item:<KEY>
	FromSeq      *int64   `json:"from_seq,omitempty"`
	Types        []string `json:"types,omitempty"`         // exact event types or prefixes ending in "*"
	Presence     bool     `json:"presence,omitempty"`      // the subject is present on the stream while it lives
	ItemPresence bool     `json:"item_presence,omitempty"` // on a project: who has its items open
}

// SubscribeResult is stream.subscribe's result.
type SubscribeResult struct {
	Subscription string `json:"subscription"`
	Seq          int64  `json:"seq"` // the stream's position when the subscription started
}

// UnsubscribeParams is stream.unsubscribe's params.
type UnsubscribeParams struct {
	Subscription string `json:"subscription"`
}

// Empty is the result of a request that answers nothing but success: {}.
type Empty struct{}

// Event is stream.event's params without the subscription: one event of the log, encoded once
// for all the subscriptions that get it.
type Event struct {
	Seq        int64         `json:"seq"`
	Type       string        `json:"type"`
	EntityType string        `json:"entity_type"`
	EntityID   string        `json:"entity_id"`
	EntityKey  *string       `json:"entity_key"`  // null when the event has none
	OccurredAt int64         `json:"occurred_at"` // Unix milliseconds
	Actor      Actor         `json:"actor"`
	Payload    codec.RawJSON `json:"payload"` // the event's JSON object (a map in MessagePack)
}

// EventParams is stream.event's params.
type EventParams struct {
	Subscription string `json:"subscription"`
	Event
}

// Actor is who caused an event.
type Actor struct {
	Kind    string `json:"kind" enum:"human|agent|service|system"`
	Subject string `json:"subject"`
}

// ClosedParams is stream.closed's params.
type ClosedParams struct {
	Subscription string `json:"subscription"`
	Reason       string `json:"reason" enum:"lagging|forbidden|not_found"`
}

// PresenceGetParams is presence.get's params.
type PresenceGetParams struct {
	Stream string `json:"stream"`
	Items  bool   `json:"items,omitempty"` // on a project: who has each of its items open
}

// PresenceGetResult is presence.get's result.
type PresenceGetResult struct {
	Stream    string           `json:"stream"`
	Members   []PresenceMember `json:"members"`
	Truncated bool             `json:"truncated"`
	// Items and ItemsTruncated are present when the params asked for items.
	Items          *[]ItemMembers `json:"items,omitempty"`
	ItemsTruncated *bool          `json:"items_truncated,omitempty"`
}

// PresenceMember is one subject present on a stream.
type PresenceMember struct {
	Subject     string `json:"subject"`
	Connections int    `json:"connections"`
}

// ItemMembers is who has one item open.
type ItemMembers struct {
	Stream  string           `json:"stream"` // item:<KEY>
	Members []PresenceMember `json:"members"`
}

// Presence is presence.changed's params without the subscription: who joined and who left a
// stream, left first, encoded once for all the subscriptions that get it.
type Presence struct {
	Stream string            `json:"stream"`
	Joined []PresenceSubject `json:"joined"`
	Left   []PresenceSubject `json:"left"`
}

// PresenceChangedParams is presence.changed's params.
type PresenceChangedParams struct {
	Subscription string `json:"subscription"`
	Presence
}

// PresenceSubject names a subject in a presence change.
type PresenceSubject struct {
	Subject string `json:"subject"`
}

// SendParams is planner.send's params.
type SendParams struct {
	Session        string  `json:"session"`
	Text           string  `json:"text"`
	IdempotencyKey *string `json:"idempotency_key,omitempty"` // 1–64 characters
}

// SendResult is planner.send's result.
type SendResult struct {
	Seq int64 `json:"seq"` // the message's position in the transcript
}

// CancelParams is planner.cancel's params.
type CancelParams struct {
	Session string `json:"session"`
}

// WatchParams is planner.watch's params.
type WatchParams struct {
	Subscription string `json:"subscription"` // 1–64 characters, unique on the connection
	Session      string `json:"session"`
	Turn         string `json:"turn,omitempty"`  // resume this turn …
	After        *int64 `json:"after,omitempty"` // … after this offset
}

// WatchResult is planner.watch's result.
type WatchResult struct {
	Subscription string `json:"subscription"`
	Running      bool   `json:"running"`
	Turn         string `json:"turn,omitempty"`
	Resumed      *bool  `json:"resumed,omitempty"` // present when the params named a turn
}

// Output is one output of a planner turn: planner.output's params without the subscription.
type Output struct {
	Session string `json:"session"`
	// Turn is the id of the turn the output belongs to, and Offset its place in the turn
	// (1, 2, 3, …): the same on every replica, for every watcher.
	Turn      string        `json:"turn"`
	Offset    int64         `json:"offset"`
	Type      string        `json:"type" enum:"text|tool_call|tool_result|message|compacted|error|done"`
	Text      string        `json:"text,omitempty"`
	Tool      string        `json:"tool,omitempty"`
	ToolUseID string        `json:"tool_use_id,omitempty"`
	Input     codec.RawJSON `json:"input,omitempty"`    // the tool call's input, a JSON object
	IsError   *bool         `json:"is_error,omitempty"` // set on every tool_result
	Seq       int64         `json:"seq,omitempty"`
}

// OutputParams is planner.output's params.
type OutputParams struct {
	Subscription string `json:"subscription"`
	Output
}

// The limits a -32029 error's data names (LimitData.Limit).
const (
	LimitSubscriptions         = "subscriptions"           // stream subscriptions and planner watches of a connection
	LimitRequests              = "requests"                // requests per second of a connection
	LimitSubjectRequests       = "subject_requests"        // requests per second of one subject on a replica
	LimitReplay                = "replay"                  // events replayed per second for one subject on a replica
	LimitConnectionsPerSubject = "connections_per_subject" // connections of one subject on a replica
	LimitPlannerTurns          = "planner_turns"           // planner turns of one subject running at once, on all replicas
)

// LimitData is the data of a -32029 error.
type LimitData struct {
	Limit        string `json:"limit" enum:"subscriptions|requests|subject_requests|replay|connections_per_subject|planner_turns"`
	Max          int    `json:"max"`
	RetryAfterMs *int64 `json:"retry_after_ms,omitempty"` // when trying again later can succeed
}
