package tracker

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/streams"
)

// Item states.
const (
	StateBacklog    = "backlog"
	StateReady      = "ready"
	StateInProgress = "in_progress"
	StateDone       = "done"
)

// Limits of text fields: the defaults of Options' item limits, and fixed ones in characters.
const (
	DefaultMaxTitleChars       = 200      // characters of an item title
	DefaultMaxDescriptionBytes = 64 << 10 // bytes (UTF-8) of an item description
	// The ceilings of those settings, which the database checks too.
	CeilingTitleChars       = 10_000
	CeilingDescriptionBytes = 1 << 20
	MaxProjectName          = 200
	MaxQuery                = 200 // of an items listing's search text
)

// Names of the item limits, in problems ("limit") and errors (Error.Limit).
const (
	LimitTitleChars       = "title_chars"
	LimitDescriptionBytes = "description_bytes"
)

// Limits bound the text members write into items. The Service checks them; stores check the
// rest of an item's validity, not its length.
type Limits struct {
	TitleChars       int // longest title, in characters
	DescriptionBytes int // longest description, in bytes of UTF-8
}

// check refuses a title or description (nil when not written) beyond the limits (ErrInvalid).
func (l Limits) check(title, description *string) error {
	if title != nil && utf8.RuneCountInString(*title) > l.TitleChars {
		return limitError(LimitTitleChars, l.TitleChars, "title: longer than %d characters")
	}
	if description != nil && len(*description) > l.DescriptionBytes {
		return limitError(LimitDescriptionBytes, l.DescriptionBytes, "description: longer than %d bytes")
	}
	return nil
}

// ValidState reports whether s is one of the item states.
func ValidState(s string) bool {
	switch s {
	case StateBacklog, StateReady, StateInProgress, StateDone:
		return true
	}
	return false
}

// Actor kinds: a person, the planner acting for a person, or a program with its own identity.
const (
	ActorHuman   = streams.ActorHuman
	ActorAgent   = streams.ActorAgent
	ActorService = streams.ActorService
)

// Actor is who makes a change. Permissions are those of Subject; for an agent that is the
// human it acts for.
type Actor struct {
	Kind    string // ActorHuman, ActorAgent or ActorService
	Subject string
}

// ActorFor returns the actor of an authenticated caller: human, or service for a
// client-credentials token.
func ActorFor(p *auth.Principal) Actor {
	if p.Human {
		return Actor{Kind: ActorHuman, Subject: p.Subject}
	}
	return Actor{Kind: ActorService, Subject: p.Subject}
}

// Check reports an actor that cannot be recorded (ErrInvalid).
func (a Actor) Check() error {
	switch a.Kind {
	case ActorHuman, ActorAgent, ActorService:
	default:
		return fault.Errorf(ErrInvalid, "actor kind %q: want human, agent or service", a.Kind)
	}
	if a.Subject == "" || !streams.ValidText(a.Subject) {
		return fault.Errorf(ErrInvalid, "actor subject: want non-empty text")
	}
	return nil
}

// Project is a project as one subject sees it.
type Project struct {
	Key       string
	Name      string
	Role      string // the subject's role, "" for none
	CreatedAt time.Time
}

// MarshalJSON renders {"key", "name", "role", "created_at"}; role is omitted when empty.
func (p Project) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Key       string `json:"key"`
		Name      string `json:"name"`
		Role      string `json:"role,omitempty"`
		CreatedAt string `json:"created_at"`
	}{p.Key, p.Name, p.Role, FormatTime(p.CreatedAt)})
}

// Member is a subject's role in a project.
type Member struct {
	Project string `json:"project"`
	Subject string `json:"subject"`
	Role    string `json:"role"`
}

// Item is a tracker item.
type Item struct {
	Key         string // "<PROJECT>-<Number>"
	ID          string // UUIDv7
	Project     string
	Number      int64
	Title       string
	Description string
	State       string
	Version     int64    // 1 when created, incremented on every change
	BlockedBy   []string // keys of the items that block this one, by number
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

type itemJSON struct {
	Key         string   `json:"key"`
	ID          string   `json:"id"`
	Project     string   `json:"project"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	State       string   `json:"state"`
	Version     int64    `json:"version"`
	BlockedBy   []string `json:"blocked_by"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`
}

// MarshalJSON renders the item as REST and item.created show it; times are RFC 3339 with
// milliseconds, blocked_by is never null.
func (it Item) MarshalJSON() ([]byte, error) {
	bb := it.BlockedBy
	if bb == nil {
		bb = []string{}
	}
	return json.Marshal(itemJSON{
		Key: it.Key, ID: it.ID, Project: it.Project, Title: it.Title, Description: it.Description,
		State: it.State, Version: it.Version, BlockedBy: bb,
		CreatedAt: FormatTime(it.CreatedAt), UpdatedAt: FormatTime(it.UpdatedAt),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (it *Item) UnmarshalJSON(b []byte) error {
	var j itemJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	created, err := time.Parse(time.RFC3339Nano, j.CreatedAt)
	if err != nil {
		return err
	}
	updated, err := time.Parse(time.RFC3339Nano, j.UpdatedAt)
	if err != nil {
		return err
	}
	_, n, _ := ParseItemKey(j.Key)
	*it = Item{
		Key: j.Key, ID: j.ID, Project: j.Project, Number: n, Title: j.Title, Description: j.Description,
		State: j.State, Version: j.Version, BlockedBy: j.BlockedBy, CreatedAt: created, UpdatedAt: updated,
	}
	return nil
}

// TimeFormat is how times appear in JSON: RFC 3339 in UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime formats t with TimeFormat in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// ItemInput is a new item. State "" means backlog.
type ItemInput struct {
	Title       string
	Description string
	State       string
}

// ItemPatch changes the fields that are not nil.
type ItemPatch struct {
	Title       *string
	Description *string
	State       *string
}

// ItemFilter selects items: State "" means any, Query "" means any; otherwise Query must
// appear in the title or the description, ignoring case.
type ItemFilter struct {
	State string
	Query string
}

// ItemPage asks for one page of a listing of items, which is by number: the items numbered
// after After, at most Limit of them and, past the first, at most MaxBytes of them (Item.Size).
type ItemPage struct {
	After int64 // the number the previous page ended at (ItemList.Next); 0 for the first page
	Limit int   // 1 to 500; 0 means 100
	// MaxBytes bounds what the page holds, as the sum of its items' Size; the first item is
	// taken whatever its size, so that every item can be listed. 0 means no bound but Limit.
	MaxBytes int
}

// Take reports whether a page of n items whose sizes add up to bytes takes one more of size:
// below Limit, and within MaxBytes unless it is the first. A store that is refused one more
// item while more match ends the page there, with Next.
func (p *ItemPage) Take(n, bytes, size int) bool {
	return n < p.Limit && (n == 0 || p.MaxBytes <= 0 || bytes+size <= p.MaxBytes)
}

// itemOverhead is what an item holds beside its text: the struct, its times and numbers.
const itemOverhead = 256

// Size is about what the item holds in memory, and at least what its text takes in JSON
// unescaped: its strings, its dependencies' keys, and a fixed overhead.
func (it *Item) Size() int {
	n := itemOverhead + len(it.Key) + len(it.ID) + len(it.Project) + len(it.Title) + len(it.Description) + len(it.State)
	for _, b := range it.BlockedBy {
		n += len(b) + 16
	}
	return n
}

// ItemList is one page of items.
type ItemList struct {
	Items []Item // by number
	Seq   int64  // the log position they are consistent with
	// Next is the After of the following page (the number of the last item here), 0 when
	// this is the last page.
	Next int64
}

// Check validates the input (ErrInvalid), but for the lengths that Limits bound, and fills in
// the default state.
func (in *ItemInput) Check() error {
	if in.State == "" {
		in.State = StateBacklog
	}
	if err := checkTitle(in.Title); err != nil {
		return err
	}
	if err := checkDescription(in.Description); err != nil {
		return err
	}
	return checkState(in.State)
}

// Check validates the fields the patch sets (ErrInvalid), but for the lengths that Limits bound.
func (p *ItemPatch) Check() error {
	if p.Title != nil {
		if err := checkTitle(*p.Title); err != nil {
			return err
		}
	}
	if p.Description != nil {
		if err := checkDescription(*p.Description); err != nil {
			return err
		}
	}
	if p.State != nil {
		return checkState(*p.State)
	}
	return nil
}

// Check validates the filter (ErrInvalid).
func (f *ItemFilter) Check() error {
	if f.State != "" {
		if err := checkState(f.State); err != nil {
			return err
		}
	}
	if !streams.ValidText(f.Query) || utf8.RuneCountInString(f.Query) > MaxQuery {
		return fault.Errorf(ErrInvalid, "query: want text of at most %d characters", MaxQuery)
	}
	return nil
}

// Check validates the page (ErrInvalid) and fills in the default limit (httpapi.PageLimit).
func (p *ItemPage) Check() error {
	limit, ok := httpapi.PageLimit(p.Limit)
	if !ok || p.After < 0 {
		return fault.Errorf(ErrInvalid, "page: want a limit from 1 to %d after a number of at least 0", httpapi.MaxPageLimit)
	}
	p.Limit = limit
	return nil
}

// Matches reports whether it passes the filter.
func (f *ItemFilter) Matches(it *Item) bool {
	if f.State != "" && it.State != f.State {
		return false
	}
	if f.Query == "" {
		return true
	}
	q := strings.ToLower(f.Query)
	return strings.Contains(strings.ToLower(it.Title), q) || strings.Contains(strings.ToLower(it.Description), q)
}

func checkTitle(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return fault.Errorf(ErrInvalid, "title: must not be empty")
	case !streams.ValidText(s):
		return fault.Errorf(ErrInvalid, "title: not text (NUL or invalid UTF-8)")
	}
	return nil
}

func checkDescription(s string) error {
	if !streams.ValidText(s) {
		return fault.Errorf(ErrInvalid, "description: not text (NUL or invalid UTF-8)")
	}
	return nil
}

func checkState(s string) error {
	if !ValidState(s) {
		return fault.Errorf(ErrInvalid, "state %q: want backlog, ready, in_progress or done", s)
	}
	return nil
}

// CheckProject validates a new project's key and name (ErrInvalid).
func CheckProject(key, name string) error {
	if !streams.ValidProjectKey(key) {
		return fault.Errorf(ErrInvalid, "project key %q: want an upper-case letter and up to 19 upper-case letters or digits", key)
	}
	switch {
	case strings.TrimSpace(name) == "":
		return fault.Errorf(ErrInvalid, "project name: must not be empty")
	case !streams.ValidText(name):
		return fault.Errorf(ErrInvalid, "project name: not text (NUL or invalid UTF-8)")
	case utf8.RuneCountInString(name) > MaxProjectName:
		return fault.Errorf(ErrInvalid, "project name: longer than %d characters", MaxProjectName)
	}
	return nil
}

// CheckMember validates a membership change's subject and role (ErrInvalid); role "" is
// not checked (a removal).
func CheckMember(subject, role string) error {
	if subject == "" || !streams.ValidText(subject) || len(subject) > 255 {
		return fault.Errorf(ErrInvalid, "subject: want non-empty text of at most 255 bytes")
	}
	if role != "" && !streams.ValidRole(role) {
		return fault.Errorf(ErrInvalid, "role %q: want viewer, member or admin", role)
	}
	return nil
}

// ItemKey returns "<project>-<n>".
func ItemKey(project string, n int64) string {
	return project + "-" + strconv.FormatInt(n, 10)
}

// ParseItemKey splits "<PROJECT>-<n>" (a valid project key, n a positive decimal without
// leading zeros); ok is false for anything else.
func ParseItemKey(key string) (project string, n int64, ok bool) {
	i := strings.LastIndexByte(key, '-')
	if i <= 0 || i == len(key)-1 || len(key)-i-1 > 18 {
		return "", 0, false
	}
	project, num := key[:i], key[i+1:]
	if !streams.ValidProjectKey(project) || num[0] == '0' {
		return "", 0, false
	}
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return project, n, true
}
