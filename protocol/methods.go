package protocol

import "slices"

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
}

var table = [...]Method{
	{Name: Auth, Dir: Served},
	{Name: AuthRefresh, Dir: Served},
	{Name: Heartbeat, Dir: Served | Sent, Notification: true},
	{Name: SystemPing, Dir: Served},
	{Name: StreamSubscribe, Dir: Served},
	{Name: StreamUnsubscribe, Dir: Served},
	{Name: StreamEvent, Dir: Sent, Notification: true},
	{Name: StreamClosed, Dir: Sent, Notification: true},
	{Name: PresenceGet, Dir: Served},
	{Name: PresenceChanged, Dir: Sent, Notification: true},
	{Name: PlannerSend, Dir: Served},
	{Name: PlannerCancel, Dir: Served},
	{Name: PlannerWatch, Dir: Served},
	{Name: PlannerOutput, Dir: Sent, Notification: true},
}

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
