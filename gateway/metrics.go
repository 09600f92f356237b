package gateway

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/operator"
	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/streams"
)

// Metrics are the gateway's Prometheus metrics, all named ballet_gateway_*.
type Metrics struct {
	Registry *prometheus.Registry

	Connections     *prometheus.GaugeVec   // by codec
	Connects        *prometheus.CounterVec // by codec
	Closes          *prometheus.CounterVec // by close code
	AuthFailures    *prometheus.CounterVec // by reason
	MessagesIn      *prometheus.CounterVec // by method
	MessagesOut     *prometheus.CounterVec // by method
	Requests        *prometheus.CounterVec // by method and code
	RequestDuration *prometheus.HistogramVec
	Subscriptions   *prometheus.GaugeVec // by stream kind
	EventsDelivered prometheus.Counter
	CatchUps        *prometheus.CounterVec // subscriptions that fell behind the window, by outcome (caught_up, lagging)
	LaggingCloses   prometheus.Counter
	ServerCloses    *prometheus.CounterVec // stream.closed by reason
	ReplayEvents    prometheus.Histogram
	LimitRejections *prometheus.CounterVec // by limit
	Sockets         *prometheus.GaugeVec   // client port sockets by state (new, active, idle, session)
	SocketsEvicted  prometheus.Counter     // idle keep-alive sockets closed to make room
	PresenceMembers prometheus.Gauge       // (stream, subject) pairs present through this replica
	PresenceChanges prometheus.Counter     // presence.changed notifications queued to clients
	OperatorActions *prometheus.CounterVec // sign-outs, blocks and unblocks applied from the log, by action
	OperatorCloses  prometheus.Counter     // connections closed by an operator's sign-out or block
	AdminListings   *prometheus.CounterVec // operators' connection listings, by outcome (operator.Listing*)
	IssuerLoaded    prometheus.Gauge       // 1 once the OIDC issuer's discovery and keys are fetched
	IssuerFailures  prometheus.Counter     // failed attempts to fetch the issuer's discovery or first keys
	RESTListings    prometheus.Gauge       // REST listings being answered (httpapi.Listings)

	Planner *planner.Metrics // fed through PlannerObserver
}

// methodLabel bounds the method label to the protocol table's names; anything else counts
// as "other".
func methodLabel(m string) string {
	if _, ok := protocol.Lookup(m); ok {
		return m
	}
	return "other"
}

// NewMetrics registers the gateway's metrics, with the Go runtime and process
// collectors, on a new registry.
func NewMetrics() *Metrics {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	const ns = "ballet_gateway"
	m := &Metrics{
		Registry: r,
		Connections: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "connections",
			Help: "Open /rpc connections (WebSockets, and POST /rpc responses), by codec and transport."}, []string{"codec", "transport"}),
		Connects: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "connects_total",
			Help: "/rpc connections accepted (WebSockets, and POST /rpc responses), by codec and transport."}, []string{"codec", "transport"}),
		Closes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "closes_total",
			Help: "/rpc connections ended, by close code (1006 when the peer vanished; a POST /rpc response's as a WebSocket's would be) and transport."}, []string{"code", "transport"}),
		AuthFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "auth_failures_total",
			Help: "Failed authentications, by reason."}, []string{"reason"}),
		MessagesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_received_total",
			Help: "JSON-RPC requests and notifications received, by method."}, []string{"method"}),
		MessagesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "messages_sent_total",
			Help: "JSON-RPC notifications sent, by method."}, []string{"method"}),
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rpc_requests_total",
			Help: "JSON-RPC requests answered, by method and error code (0 for success)."}, []string{"method", "code"}),
		RequestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "rpc_request_duration_seconds",
			Help: "Time to answer a JSON-RPC request, by method.", Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}, []string{"method"}),
		Subscriptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "subscriptions",
			Help: "Active subscriptions, by kind (project, item, planner)."}, []string{"kind"}),
		EventsDelivered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "events_delivered_total",
			Help: "stream.event notifications handed to clients' connections."}),
		CatchUps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "catch_ups_total",
			Help: "Subscriptions that fell behind the window of recent events and read the log, by outcome (caught_up, lagging)."}, []string{"outcome"}),
		LaggingCloses: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "lagging_closes_total",
			Help: "Subscriptions closed because the client did not keep up."}),
		ServerCloses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "stream_closes_total",
			Help: "stream.closed notifications sent, by reason."}, []string{"reason"}),
		ReplayEvents: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "replay_events",
			Help: "Events replayed per stream.subscribe with from_seq.", Buckets: []float64{0, 1, 10, 50, 100, 250, 500, 1000}}),
		LimitRejections: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "limit_rejections_total",
			Help: limitRejectionsHelp}, []string{"limit"}),
		Sockets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "sockets",
			Help: "Open sockets of the client port counted against BALLET_MAX_CONNECTIONS, by state (new, active, idle, session)."}, []string{"state"}),
		SocketsEvicted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "sockets_evicted_total",
			Help: "Idle keep-alive sockets closed to make room for new sockets."}),
		PresenceMembers: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "presence_members",
			Help: "Subjects present on streams through this replica's connections, counted once per stream."}),
		PresenceChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "presence_changes_total",
			Help: "presence.changed notifications queued to clients."}),
		OperatorActions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "operator_actions_total",
			Help: "Operators' actions on subjects this replica applied from the log, by action (sign_out, block, unblock)."}, []string{"action"}),
		OperatorCloses: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "operator_closes_total",
			Help: "Connections closed with 4001 because an operator signed out or blocked their subject."}),
		AdminListings: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "admin_listings_total",
			Help: "Operators' connection listings, by outcome (asked, refused, answered, busy, failed)."}, []string{"outcome"}),
		IssuerLoaded: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "oidc_issuer_loaded",
			Help: "1 once the OIDC issuer's discovery document and keys are fetched; until then tokens are refused."}),
		IssuerFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "oidc_discovery_failures_total",
			Help: "Failed attempts to fetch the OIDC issuer's discovery document or first key set."}),
		RESTListings: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "rest_listings",
			Help: "REST listings (pages and transcripts) being answered on this replica."}),
	}
	r.MustRegister(m.Connections, m.Connects, m.Closes, m.AuthFailures, m.MessagesIn, m.MessagesOut,
		m.Requests, m.RequestDuration, m.Subscriptions, m.EventsDelivered, m.CatchUps, m.LaggingCloses, m.ServerCloses,
		m.ReplayEvents, m.LimitRejections,
		m.Sockets, m.SocketsEvicted, m.PresenceMembers, m.PresenceChanges,
		m.OperatorActions, m.OperatorCloses, m.AdminListings, m.IssuerLoaded, m.IssuerFailures, m.RESTListings)
	r.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: "partial_message_bytes",
		Help: "Heap held for WebSocket messages whose frames have not all arrived (the process's connections)."},
		func() float64 { return float64(wsnet.PartialBytes()) }))
	m.Planner = planner.NewMetrics(ns, func(limit string) { m.LimitRejections.WithLabelValues(limit).Inc() })
	r.MustRegister(m.Planner.Collectors()...)
	for _, c := range []string{"msgpack", "json"} {
		m.Connections.WithLabelValues(c, transportWebSocket)
		m.Connects.WithLabelValues(c, transportWebSocket)
	}
	m.Connections.WithLabelValues("json", transportHTTP)
	m.Connects.WithLabelValues("json", transportHTTP)
	for _, st := range edge.StateNames() {
		m.Sockets.WithLabelValues(st)
	}
	for _, l := range limitLabels {
		m.LimitRejections.WithLabelValues(l)
	}
	for _, a := range operator.Actions {
		m.OperatorActions.WithLabelValues(a)
	}
	for _, o := range operator.ListingOutcomes {
		m.AdminListings.WithLabelValues(o)
	}
	for _, k := range []string{"project", "item", "planner"} {
		m.Subscriptions.WithLabelValues(k)
	}
	// Every other fixed label value at zero too, so that a fresh replica's dashboards and
	// alerts read 0 rather than no data.
	for _, name := range protocol.Names(protocol.Served) {
		m.MessagesIn.WithLabelValues(name)
		if mt, _ := protocol.Lookup(name); !mt.Notification {
			m.Requests.WithLabelValues(name, codeLabel(0))
			m.RequestDuration.WithLabelValues(name)
		}
	}
	for _, name := range protocol.Names(protocol.Sent) {
		m.MessagesOut.WithLabelValues(name)
	}
	for _, r := range authFailureLabels() {
		m.AuthFailures.WithLabelValues(r)
	}
	for _, r := range []string{streams.ReasonLagging, streams.ReasonForbidden, streams.ReasonNotFound} {
		m.ServerCloses.WithLabelValues(r)
	}
	for _, c := range closeCodeLabels() {
		m.Closes.WithLabelValues(c, transportWebSocket)
		m.Closes.WithLabelValues(c, transportHTTP)
	}
	for _, o := range []string{catchUpOK, catchUpLagging} {
		m.CatchUps.WithLabelValues(o)
	}
	return m
}

// The outcomes of catch_ups_total.
const (
	catchUpOK      = "caught_up"
	catchUpLagging = "lagging"
)

// ObserveHub sets the hooks of o through which the hub feeds these metrics: the events its
// subscriptions' connections pull, and its catch-ups from the log.
func (m *Metrics) ObserveHub(o *streams.HubOptions) {
	o.OnDelivered = func(n int) { m.EventsDelivered.Add(float64(n)) }
	o.OnCatchUp = func(ok bool) {
		if ok {
			m.CatchUps.WithLabelValues(catchUpOK).Inc()
		} else {
			m.CatchUps.WithLabelValues(catchUpLagging).Inc()
		}
	}
}

// authFailureLabels are the reason label's values of auth_failures_total: the verifier's
// reasons and the session's own.
func authFailureLabels() []string {
	return append(auth.Reasons(), "timeout", "no_auth", "subject_changed")
}

// closeCodeLabels are the close codes a connection ends with: RFC 6455's that the server sends
// or reads (1006 when the peer vanished) and the API's own.
func closeCodeLabels() []string {
	codes := []int{1000, 1001, 1002, 1003, 1006, 1007, 1008, 1009, 1011, 1013}
	codes = append(codes, protocol.CloseCodes()...)
	out := make([]string, len(codes))
	for i, c := range codes {
		out[i] = codeLabel(c)
	}
	return out
}

// PlannerObserver returns the planner.Observer that feeds the planner's metrics, with
// series at zero for the named providers.
func (m *Metrics) PlannerObserver(providers ...string) planner.Observer {
	m.LimitRejections.WithLabelValues(planner.LimitTurns)
	m.LimitRejections.WithLabelValues(planner.LimitSessions)
	return m.Planner.Providers(providers...)
}

// RESTRejected counts a REST request refused by its subject's rate (httpapi.RateOptions.OnRefused).
func (m *Metrics) RESTRejected() { m.LimitRejections.WithLabelValues(httpapi.LimitRequests).Inc() }

// RESTListingRejected counts a REST listing refused by a bound of listings in flight
// (httpapi.ListingOptions.OnRefused).
func (m *Metrics) RESTListingRejected(limit string) { m.LimitRejections.WithLabelValues(limit).Inc() }

// RESTListingsInFlight follows the REST listings being answered (httpapi.ListingOptions.OnInFlight).
func (m *Metrics) RESTListingsInFlight(delta int) { m.RESTListings.Add(float64(delta)) }

func codeLabel(code int) string { return strconv.Itoa(code) }
