package planner

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Message roles.
const (
	RoleHuman     = "human"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Limits.
const (
	MaxTitle = 200 // characters of a session title
)

// EventMessage is the event type appended for every stored message.
const EventMessage = "planner.message"

// EntitySession is the entity_type of planner events.
const EntitySession = "planner_session"

// Caller is who calls the Service: an authenticated subject, human or not.
type Caller struct {
	Subject string
	Human   bool
}

// CallerFor returns the caller of an authenticated principal.
func CallerFor(p *auth.Principal) Caller { return Caller{Subject: p.Subject, Human: p.Human} }

// actor is the tracker actor whose permissions the caller has.
func (c Caller) actor() tracker.Actor {
	if c.Human {
		return tracker.Actor{Kind: tracker.ActorHuman, Subject: c.Subject}
	}
	return tracker.Actor{Kind: tracker.ActorService, Subject: c.Subject}
}

// Session is a planner conversation in a project.
type Session struct {
	ID        string // UUIDv7
	Project   string
	Title     string
	CreatedBy string // subject of the human who created it
	CreatedAt time.Time
	Running   bool   // a turn holds the session's lease now
	Turn      string // the running turn's id, when Running
}

// MarshalJSON renders {"id", "project", "title", "created_by", "created_at", "running"}, and
// "turn" while a turn runs.
func (s Session) MarshalJSON() ([]byte, error) {
	return json.Marshal(s.json())
}

func (s *Session) json() sessionJSON {
	return sessionJSON{s.ID, s.Project, s.Title, s.CreatedBy, tracker.FormatTime(s.CreatedAt), s.Running, s.Turn}
}

type sessionJSON struct {
	ID        string `json:"id"`
	Project   string `json:"project"`
	Title     string `json:"title"`
	CreatedBy string `json:"created_by"`
	CreatedAt string `json:"created_at"`
	Running   bool   `json:"running"`
	Turn      string `json:"turn,omitempty"`
}

// SessionKey is a session's place in its project's listing, which is newest first: by
// CreatedAt (to the microsecond, as stored), then by ID, both descending.
type SessionKey struct {
	CreatedAt time.Time
	ID        string
}

// Key returns the session's place in its project's listing.
func (s *Session) Key() SessionKey { return SessionKey{CreatedAt: s.CreatedAt, ID: s.ID} }

// Before reports whether k comes before o in the listing (is newer).
func (k SessionKey) Before(o SessionKey) bool {
	if c := k.CreatedAt.Compare(o.CreatedAt); c != 0 {
		return c > 0
	}
	return k.ID > o.ID
}

// SessionPage asks for one page of a project's sessions: those that come after After in
// the listing, at most Limit of them.
type SessionPage struct {
	After *SessionKey // the last session of the previous page (SessionList.Next); nil for the first
	Limit int         // 1 to 500; 0 means 100
}

// SessionList is one page of sessions.
type SessionList struct {
	Sessions []Session // newest first
	// Next is the After of the following page (the last session's key here), nil when this
	// is the last page.
	Next *SessionKey
}

// Check validates the page (ErrInvalid) and fills in the default limit (httpapi.PageLimit).
func (p *SessionPage) Check() error {
	limit, ok := httpapi.PageLimit(p.Limit)
	if !ok || p.After != nil && !ValidID(p.After.ID) {
		return fault.Errorf(ErrInvalid, "page: want a limit from 1 to %d after a session's place", httpapi.MaxPageLimit)
	}
	p.Limit = limit
	return nil
}

// Message is one stored message of a transcript. Content is JSON, by role:
//
//	human      "the text"                                   (a JSON string)
//	assistant  {"text": "...", "tool_calls": [{"id", "name", "input"}]}
//	tool       {"results": [{"tool_use_id", "tool", "text", "is_error"}]}
//
// "text" of an assistant message joins its text blocks; "tool_calls" is never null; a tool
// message answers the tool calls of the assistant message before it, in their order.
type Message struct {
	Session   string
	Seq       int64 // position in the transcript: 1, 2, 3, ...
	Role      string
	Content   json.RawMessage
	CreatedAt time.Time
}

// MarshalJSON renders {"seq", "role", "content", "created_at"}.
func (m Message) MarshalJSON() ([]byte, error) {
	content := m.Content
	if len(content) == 0 {
		content = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Seq       int64           `json:"seq"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CreatedAt string          `json:"created_at"`
	}{m.Seq, m.Role, content, tracker.FormatTime(m.CreatedAt)})
}

// ToolCall is a tool the assistant called.
type ToolCall struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// AssistantContent is the content of an assistant message.
type AssistantContent struct {
	Text      string     `json:"text"`
	ToolCalls []ToolCall `json:"tool_calls"`
}

// ToolResult is what one tool call returned.
type ToolResult struct {
	ToolUseID string `json:"tool_use_id"`
	Tool      string `json:"tool"`
	Text      string `json:"text"`
	IsError   bool   `json:"is_error"`
}

// ToolContent is the content of a tool message.
type ToolContent struct {
	Results []ToolResult `json:"results"`
}

// NewMessage is a message to append; the store assigns its seq and time.
type NewMessage struct {
	Role    string
	Content json.RawMessage
	// Actor is recorded on the planner.message event: the human for human messages, an agent
	// acting for that human otherwise.
	Actor tracker.Actor
	// IdempotencyKey, when set on a human message, is remembered with the message's seq for
	// Actor.Subject (Sends), in the same transaction.
	IdempotencyKey string
}

// MessageEvent is the planner.message event of a stored message; stores append it in the
// same transaction as the message. A zero at leaves the time to the log.
func MessageEvent(project, session string, seq int64, role string, a tracker.Actor, at time.Time) streams.NewEvent {
	payload, err := json.Marshal(struct {
		Session string `json:"session"`
		Seq     int64  `json:"seq"`
		Role    string `json:"role"`
	}{session, seq, role})
	if err != nil {
		panic(err) // a struct of strings and an integer always marshals
	}
	return streams.NewEvent{
		ProjectKey: project, Type: EventMessage, EntityType: EntitySession, EntityID: session,
		OccurredAt: at, ActorKind: a.Kind, ActorSubject: a.Subject, Payload: payload,
	}
}

// Summary is a model-written summary of a transcript's messages up to UpTo, which later
// model calls use instead of those messages.
type Summary struct {
	Session   string
	UpTo      int64
	Text      string
	CreatedAt time.Time
}

// Output types.
const (
	OutputText       = "text"        // a piece of the answer (Text)
	OutputToolCall   = "tool_call"   // the planner called Tool (ToolUseID, Input)
	OutputToolResult = "tool_result" // the tool returned Text (IsError)
	OutputMessage    = "message"     // message Seq was stored
	OutputCompacted  = "compacted"   // messages up to Seq were summarized for the model
	OutputError      = "error"       // the turn failed (Text explains)
	OutputDone       = "done"        // the turn ended; Text is the reason
	// OutputLagging is never published: it is the last Output a watch's fn receives when
	// the watch ended because output was lost (its queue overflowed, or this replica's
	// connection to the other replicas was re-established). The gateway closes the
	// subscription with stream.closed "lagging"; the client watches again and reloads.
	OutputLagging = "lagging"
	// OutputClosed is never published either: it is the last Output a watch's fn receives
	// when the watcher lost access to the session's project (Service.CloseWatches). Text is
	// the reason given there; the gateway closes the subscription with stream.closed and
	// that reason ("forbidden", "not_found").
	OutputClosed = "closed"
)

// Reasons of done.
const (
	DoneEndTurn   = "end_turn"
	DoneCancelled = "cancelled"
	DoneError     = "error"
	DoneMaxRounds = "max_rounds"
)

// Output is one piece of a turn's live output: the params of planner.output without
// "subscription".
type Output = protocol.Output

// TurnOfOwner returns the turn id of a lease owner, which is "<replica>/<turn>".
func TurnOfOwner(owner string) string {
	_, turn, _ := strings.Cut(owner, "/")
	return turn
}

// MaxIdempotencyKey is the longest idempotency key of planner.send, in characters.
const MaxIdempotencyKey = 64

// checkText validates a human message of at most max bytes.
func checkText(text string, max int) error {
	switch {
	case strings.TrimSpace(text) == "":
		return fault.Errorf(ErrInvalid, "text must not be empty")
	case len(text) > max:
		return fault.Errorf(ErrInvalid, "text: longer than %d bytes", max)
	case !streams.ValidText(text):
		return fault.Errorf(ErrInvalid, "text must be UTF-8 without NUL characters")
	}
	return nil
}

// checkTitle validates a session title.
func checkTitle(title string) error {
	if utf8.RuneCountInString(title) > MaxTitle || !streams.ValidText(title) {
		return fault.Errorf(ErrInvalid, "title must be UTF-8 text of at most %d characters", MaxTitle)
	}
	return nil
}

// ValidID reports whether id has the form of a session id (a UUID in lower-case hex).
func ValidID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}
