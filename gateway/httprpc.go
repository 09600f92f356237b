// POST /rpc: the realtime API over streamed HTTP, for clients whose network refuses WebSocket
// upgrades. Each request is a session of its own, authenticated by its Authorization header
// before its body opens, with every rule of a WebSocket's (budgets, limits, heartbeats, closes,
// drain): one JSON-RPC request in the body, its answer and notifications as NDJSON lines or
// Server-Sent Events in the response (wsnet.Upgrader.Stream). A one-shot method's response ends
// after its answer; stream.subscribe's and planner.watch's stay open until the subscription ends
// (stream.closed) or the client closes the request. See docs/protocol.md, "HTTP transport".

package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/gateway/edge"
	"github.com/ballet/gateway/gateway/internal/wsnet"
	"github.com/ballet/gateway/internal/httpapi"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// The transports of /rpc, as the metrics label them.
const (
	transportWebSocket = "websocket"
	transportHTTP      = "http"
)

// ErrServerEnded is the code of the error object without id that ends a streamed response the
// server ended for a reason with no code of its own (shutting down, a client too far behind):
// JSON-RPC's range for a server's errors. Its data's close is the WebSocket close code.
const ErrServerEnded = -32000

// notOverHTTP are the methods a request over HTTP may not call: its Authorization header
// authenticates it, and the server's heartbeats need no answer.
var notOverHTTP = map[string]bool{protocol.Auth: true, protocol.AuthRefresh: true, protocol.Heartbeat: true}

// servePost serves POST /rpc, under its server span when tracing is on: the span ends as the
// response opens (the request's own span, its child, lasts as long as the method).
func (s *Server) servePost(w http.ResponseWriter, r *http.Request) {
	if s.tracer == nil {
		s.post(w, r)
		return
	}
	ctx, span := s.startHTTP(r)
	sw := edge.NewStatusWriter(w)
	s.post(sw, r.WithContext(ctx))
	status := sw.Status
	if status == 0 {
		status = http.StatusOK // streamed: written on the hijacked socket
	}
	endHTTP(span, r.Method, "/rpc", status)
}

// post refuses the request (an RFC 7807 problem, or a JSON-RPC error as its body's one line)
// or starts its session.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if !s.crossOrigin(w, r) {
		return
	}
	if s.draining.Load() {
		writeProblem(w, r, http.StatusServiceUnavailable, "the gateway is shutting down; try another replica", 1)
		return
	}
	if err := s.admitAddr(r); err != nil {
		_, _, retry := err.(httpapi.Limited).Limited()
		writeProblem(w, r, http.StatusTooManyRequests, "too many connections and failed authentications from this address; try again later",
			int((retry+time.Second-1)/time.Second))
		return
	}
	p, status, detail := s.bearer(r)
	if p == nil {
		if status == http.StatusUnauthorized {
			if a := s.rateAddr(r); a.IsValid() {
				s.addrRate.ChargeAddr(a)
			}
			challenge := "Bearer"
			if r.Header.Get("Authorization") != "" {
				challenge = `Bearer error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			writeProblem(w, r, status, detail, 0)
		} else {
			writeProblem(w, r, status, detail, 5)
		}
		return
	}
	if !jsonBody(r.Header.Get("Content-Type")) {
		writeProblem(w, r, http.StatusUnsupportedMediaType, "the body must be one JSON-RPC request as application/json", 0)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.ReadLimit))
	if err != nil {
		var tooLong *http.MaxBytesError
		if errors.As(err, &tooLong) {
			writeProblem(w, r, http.StatusRequestEntityTooLarge, "the request is longer than "+strconv.FormatInt(s.cfg.ReadLimit, 10)+" bytes", 0)
		} else {
			writeProblem(w, r, http.StatusBadRequest, "the request's body could not be read", 0)
		}
		return
	}
	sse := acceptsEvents(r)
	var m codec.Message
	if err := codec.JSON.Decode(body, &m); err != nil {
		var de *codec.DecodeError
		if !errors.As(err, &de) {
			de = &codec.DecodeError{Code: codec.CodeParseError, Msg: "parse error"}
		}
		answerLine(w, sse, &codec.Message{ID: de.ID, HasID: de.HasID, Error: &codec.Error{Code: de.Code, Message: de.Msg}})
		return
	}
	switch {
	case m.IsResponse():
		answerLine(w, sse, &codec.Message{Error: &codec.Error{Code: codec.CodeInvalidRequest, Message: "a request must have a method"}})
		return
	case notOverHTTP[m.Method]:
		answerLine(w, sse, &codec.Message{ID: m.ID, HasID: m.HasID, Error: &codec.Error{Code: codec.CodeInvalidRequest,
			Message: m.Method + " is not available over HTTP: the Authorization header authenticates each request, and the server's heartbeats need no answer"}})
		return
	}
	s.startPost(w, r, p, &m, body, sse)
}

// startPost counts the request as a connection of its subject, spends its subject's request
// budget, and starts its session.
func (s *Server) startPost(w http.ResponseWriter, r *http.Request, p *auth.Principal, m *codec.Message, body []byte, sse bool) {
	refuse := func(err error) {
		var re *rpc.Error
		errors.As(err, &re)
		data, _ := json.Marshal(re.Data)
		answerLine(w, sse, &codec.Message{ID: m.ID, HasID: m.HasID, Error: &codec.Error{Code: re.Code, Message: re.Message, Data: data}})
	}
	if !s.acquireConn(w) {
		return
	}
	sess := &session{srv: s, http: true}
	b, ok := s.subjects.Acquire(p.Subject, sess)
	if !ok {
		s.releaseConn()
		s.logger.Info("request refused: too many connections of its subject", "subject", p.Subject, "transport", transportHTTP)
		refuse(s.limitError(limitSubjectConns, s.cfg.MaxConnectionsPerSubject, 0))
		return
	}
	release := func() {
		s.subjects.Release(p.Subject, sess)
		s.releaseConn()
	}
	// Checked again with the subject counted: a sign-out applied since the token was verified
	// is either seen here or finds this session (CloseSubject).
	if revoked := s.revs.Check(p); revoked != nil {
		release()
		s.metrics.AuthFailures.WithLabelValues(auth.Reason(revoked)).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeProblem(w, r, http.StatusUnauthorized, "the access token is not valid ("+auth.Reason(revoked)+")", 0)
		return
	}
	if ok, _, retry := b.requests.Take(s.cfg.SubjectRequestRate); !ok {
		release()
		refuse(s.limitError(limitSubjectRequests, s.cfg.SubjectRequestRate, retry))
		return
	}
	w.Header().Set(protocol.HeaderHeartbeatMs, strconv.FormatInt(s.cfg.HeartbeatInterval.Milliseconds(), 10))
	t, err := s.upgrader.Stream(w, r, &wsnet.StreamOptions{Request: body, SSE: sse, End: streamEnd})
	if err != nil {
		release()
		s.logger.Debug("streamed response failed to open", "err", err, "remote", r.RemoteAddr)
		return
	}
	sess.initHTTP(t, r, p, b)
	if !s.track(sess) {
		_ = t.CloseHandshake(websocket.StatusGoingAway, "the gateway is shutting down")
		release()
		return
	}
	sess.start()
}

// crossOrigin applies the WebSocket handshake's Origin rule (BALLET_ALLOWED_ORIGINS) to a
// request of POST /rpc, answering 403 and false to one it refuses; a page of another origin it
// lets in may read the answer (CORS).
func (s *Server) crossOrigin(w http.ResponseWriter, r *http.Request) bool {
	if err := wsnet.CheckOrigin(r, s.cfg.AllowedOrigins); err != nil {
		writeProblem(w, r, http.StatusForbidden, err.Error(), 0)
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" {
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Expose-Headers", protocol.HeaderHeartbeatMs)
	}
	return true
}

// preflight answers a browser's CORS preflight of POST /rpc from a page of another origin that
// BALLET_ALLOWED_ORIGINS lets in (403 for another).
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	if !s.crossOrigin(w, r) {
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Accept, traceparent, tracestate")
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
}

// admitAddr spends a token of the client's address for a new connection (BALLET_ADDR_RATE),
// or returns the refusal.
func (s *Server) admitAddr(r *http.Request) error {
	a := s.rateAddr(r)
	if !a.IsValid() {
		return nil
	}
	err := s.addrRate.AdmitAddr(a)
	if err != nil {
		s.logger.Info("connection refused: its address is beyond its rate before authentication", "addr", a.String(),
			"rate", s.cfg.AddrRate)
	}
	return err
}

// bearer verifies the request's bearer token: its principal, else the status (401, or 503
// while tokens cannot be verified) and the problem's detail.
func (s *Server) bearer(r *http.Request) (*auth.Principal, int, string) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		s.metrics.AuthFailures.WithLabelValues("no_auth").Inc()
		return nil, http.StatusUnauthorized, "an OIDC access token is required: Authorization: Bearer <token>"
	}
	ctx, cancel := context.WithTimeout(r.Context(), verifyTimeout)
	defer cancel()
	p, err := s.verifier.Verify(ctx, token)
	if err != nil {
		reason := auth.Reason(err)
		s.metrics.AuthFailures.WithLabelValues(reason).Inc()
		if reason == auth.ReasonUnavailable {
			s.logger.Warn("token verification unavailable", "err", err)
			return nil, http.StatusServiceUnavailable, "tokens cannot be verified right now"
		}
		return nil, http.StatusUnauthorized, "the access token is not valid (" + reason + ")"
	}
	return p, 0, ""
}

// jsonBody reports whether a body of media type ct may be the JSON request: application/json
// and the JSON types, none, and what a terminal's `curl -d` sends (a form's type; the body is
// still read as JSON). The Authorization header a request needs makes a browser ask before it
// sends one from another origin, whatever its type.
func jsonBody(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "text/plain" ||
		mt == "application/x-www-form-urlencoded")
}

// acceptsEvents reports whether the client asks for Server-Sent Events.
func acceptsEvents(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/event-stream" {
				return true
			}
		}
	}
	return false
}

// writeProblem answers an RFC 7807 problem of status with detail, and Retry-After when retry
// (seconds) is positive.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, detail string, retry int) {
	if retry > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retry))
	}
	httpapi.WriteProblem(w, r, httpapi.Errorf(status, "%s", detail))
}

// answerLine answers the request with m as the body's one line (or event).
func answerLine(w http.ResponseWriter, sse bool, m *codec.Message) {
	line, _ := codec.JSON.Encode(nil, m)
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if sse {
		h.Set("Content-Type", "text/event-stream")
		line = append(append([]byte("data: "), line...), "\n\n"...)
	} else {
		h.Set("Content-Type", "application/x-ndjson")
		line = append(line, '\n')
	}
	h.Set("Content-Length", strconv.Itoa(len(line)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(line)
}

// streamEnd is the last line of a streamed response the server ended with code: nothing for
// a normal end (the request answered, the subscription closed), else an error object without
// id that tells why, with the close code a WebSocket would have had (wsnet.StreamOptions.End).
func streamEnd(code websocket.StatusCode, reason string) []byte {
	rc := ErrServerEnded
	switch code {
	case 0, websocket.StatusNormalClosure:
		return nil
	case StatusUnauthenticated:
		rc = int(protocol.ErrUnauthenticated)
	case StatusLimitExceeded:
		rc = int(protocol.ErrLimitExceeded)
	}
	if reason == "" {
		reason = "the server ended the response"
	}
	type closeData struct {
		Close int `json:"close"`
	}
	type endError struct {
		Code    int       `json:"code"`
		Message string    `json:"message"`
		Data    closeData `json:"data"`
	}
	line, _ := json.Marshal(struct {
		JSONRPC string   `json:"jsonrpc"`
		Error   endError `json:"error"`
	}{"2.0", endError{rc, reason, closeData{int(code)}}})
	return line
}

// initHTTP sets up s, a POST /rpc's session, made with its server, for the principal its
// Authorization header proved, counted against its subject with budget b.
func (s *session) initHTTP(t *wsnet.Transport, r *http.Request, p *auth.Principal, b *subjectBudget) {
	s.init(t, codec.JSON, r, netip.Addr{}) // counted against no address: it is authenticated
	s.principal, s.counted = p, true
	s.budget.Store(b)
	s.setExpiry(p.ExpiresAt)
}

// answeredHTTP runs once a POST /rpc's request is answered (or, a notification, served).
func (s *session) answeredHTTP() {
	s.answered.Store(true)
	s.endIfDone()
}

// endIfDone ends a POST /rpc's response once its request is answered and it holds no
// subscription: a one-shot method's after its answer, a subscription's after its stream.closed
// (queued before: the close flushes it).
func (s *session) endIfDone() {
	if !s.http || !s.answered.Load() {
		return
	}
	s.mu.Lock()
	n := s.subs.len()
	s.mu.Unlock()
	if n == 0 {
		s.closeWith(websocket.StatusNormalClosure, "")
	}
}
