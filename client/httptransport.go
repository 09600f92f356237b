package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

const (
	// httpQueue bounds the lines read from the responses and not yet taken by the connection's
	// reader: beyond it, the responses are read no further and TCP holds the server back.
	httpQueue = 64
	// httpOneShots bounds the POSTs of one-shot requests in flight; a further request waits
	// for one to end (the connection's own queue holds it meanwhile).
	httpOneShots = 32
	// unknownTokenLife is the life the client gives a token whose expiry it cannot read (not a
	// JWT): it checks it again, with auth.refresh, at 80 % of that.
	unknownTokenLife = 5 * time.Minute
	// problemBytes bounds what is read of a refusal's body.
	problemBytes = 4 << 10
)

// errHTTPLost ends a connection over HTTP whose POST failed, or whose response was cut short or
// ended without saying why: the server is gone, as with a WebSocket that drops (1006).
var errHTTPLost = errors.New("client: connection over HTTP lost")

// httpTransport carries one connection over HTTP (POST /rpc), for rpc.Conn as if it were
// one: each request the connection writes is POSTed on its own, and the lines of every
// response come to Read, each response's in order. It answers auth and auth.refresh itself
// (each POST carries the token in its Authorization header: a system.ping checks a new one),
// drops $/heartbeat (the server sends them on each open response, and needs none), and ends a
// subscription's or a planner watch's open response when it is unsubscribed. An open response
// that ends with a close code ends the whole connection as that WebSocket close would, and one
// cut short or silent for three heartbeat intervals ends it as lost.
type httpTransport struct {
	url     string // the gateway's /rpc over http:// or https://
	hc      *http.Client
	header  http.Header
	limit   int64         // the longest line read, Options.ReadLimit
	user    time.Duration // Options.HeartbeatInterval
	silence time.Duration // an open response silent so long is lost, unless its header says more
	in      chan []byte   // lines for Read
	slots   chan struct{} // one-shot POSTs in flight

	ctx    context.Context // every POST's: ends with the connection
	cancel context.CancelFunc
	wg     sync.WaitGroup // the POSTs and local answers

	mu      sync.Mutex
	token   string                 // the token the last auth or auth.refresh checked
	subject string                 // its subject
	streams map[string]*httpStream // open responses, by subscription id
	ended   bool                   // no goroutine starts any more
	err     error                  // why the connection ended
}

// httpStream is the open response of a stream.subscribe or planner.watch.
type httpStream struct {
	cancel context.CancelFunc
}

var _ rpc.Transport = (*httpTransport)(nil)

func (c *Client) newHTTPTransport() *httpTransport {
	_, iv := heartbeats(c.o.HeartbeatInterval, 0)
	t := &httpTransport{
		url: httpURL(c.url), hc: c.o.HTTPClient, header: c.o.Header, limit: c.o.ReadLimit, user: c.o.HeartbeatInterval, silence: 3 * iv,
		in: make(chan []byte, httpQueue), slots: make(chan struct{}, httpOneShots),
		streams: map[string]*httpStream{},
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	return t
}

// httpURL is the address of POST /rpc for a WebSocket's address.
func httpURL(u string) string {
	switch {
	case strings.HasPrefix(u, "ws://"):
		return "http://" + u[len("ws://"):]
	case strings.HasPrefix(u, "wss://"):
		return "https://" + u[len("wss://"):]
	}
	return u
}

// Read returns the next line of any response; lines read before the connection ended come
// first.
func (t *httpTransport) Read(ctx context.Context) ([]byte, error) {
	select {
	case line := <-t.in:
		return line, nil
	default:
	}
	select {
	case line := <-t.in:
		return line, nil
	case <-t.ctx.Done():
		return nil, t.failure()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// outgoing is what the transport reads of a message the connection writes.
type outgoing struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// outParams are the params the transport reads: auth's token, the subscription id of
// stream.subscribe, planner.watch and stream.unsubscribe, and the trace context of any.
type outParams struct {
	Token        string            `json:"token"`
	Subscription string            `json:"subscription"`
	Meta         map[string]string `json:"_meta"`
}

// Write sends one message: it starts its POST, or its answer, and returns.
func (t *httpTransport) Write(_ context.Context, frame []byte) error {
	if t.ctx.Err() != nil {
		return t.failure()
	}
	var m outgoing
	if err := json.Unmarshal(frame, &m); err != nil {
		return fmt.Errorf("client: over HTTP: %w", err)
	}
	hasID := len(m.ID) > 0 && string(m.ID) != "null"
	var p outParams
	_ = json.Unmarshal(m.Params, &p) // params that are not an object carry none: the server answers them
	switch {
	case m.Method == "" || m.Method == protocol.Heartbeat:
		return nil // the server makes no requests, and needs no heartbeat
	case m.Method == protocol.Auth || m.Method == protocol.AuthRefresh:
		if hasID {
			t.spawn(func() { t.auth(m.ID, p.Token, m.Method == protocol.AuthRefresh, p.Meta) })
		}
		return nil
	case m.Method == protocol.StreamUnsubscribe && hasID:
		t.spawn(func() { t.unsubscribe(m.ID, p.Subscription) })
		return nil
	}
	body := bytes.Clone(frame) // frame is the writer's to reuse
	if m.Method != protocol.StreamSubscribe && m.Method != protocol.PlannerWatch {
		select {
		case t.slots <- struct{}{}:
		case <-t.ctx.Done():
			return t.failure()
		}
		if !t.spawn(func() {
			defer func() { <-t.slots }()
			t.exchange(t.ctx, m.ID, hasID, body, p.Meta, nil)
		}) {
			<-t.slots
		}
		return nil
	}
	ctx, cancel := context.WithCancel(t.ctx)
	st := &httpStream{cancel: cancel}
	t.mu.Lock()
	t.streams[p.Subscription] = st
	t.mu.Unlock()
	if !t.spawn(func() {
		defer cancel()
		defer t.forget(p.Subscription, st)
		t.exchange(ctx, m.ID, hasID, body, p.Meta, st)
	}) {
		cancel()
	}
	return nil
}

// spawn runs f on a goroutine of the transport's; false when the transport has ended.
func (t *httpTransport) spawn(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// forget drops the open response st of subscription id, unless another took its place.
func (t *httpTransport) forget(id string, st *httpStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streams[id] == st {
		delete(t.streams, id)
	}
}

// Close ends the connection: every POST is cancelled, which closes its request.
func (t *httpTransport) Close() error {
	t.end(rpc.ErrClosed)
	return nil
}

// wait returns once the transport's goroutines have.
func (t *httpTransport) wait() { t.wg.Wait() }

// end ends the connection for err (the first reason wins).
func (t *httpTransport) end(err error) {
	t.mu.Lock()
	if !t.ended {
		t.ended, t.err = true, err
	}
	t.mu.Unlock()
	t.cancel()
}

func (t *httpTransport) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// deliver hands line to Read, waiting while the queue is full; false when the connection
// ended first.
func (t *httpTransport) deliver(line []byte) bool {
	select {
	case t.in <- line:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// wireError is a JSON-RPC error object the transport answers.
type wireError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// answer delivers a response to request id made here: result, or rerr (a *wireError, or the
// server's error object as it came).
func (t *httpTransport) answer(id json.RawMessage, result, rerr any) {
	type response struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   any             `json:"error,omitempty"`
	}
	line, err := json.Marshal(response{JSONRPC: "2.0", ID: id, Result: result, Error: rerr})
	if err != nil {
		t.end(fmt.Errorf("client: over HTTP: %w", err))
		return
	}
	t.deliver(line)
}

// unsubscribe ends subscription id's open response, which the server then ends too.
func (t *httpTransport) unsubscribe(id json.RawMessage, sub string) {
	t.mu.Lock()
	st := t.streams[sub]
	delete(t.streams, sub)
	t.mu.Unlock()
	if st == nil {
		t.answer(id, nil, &wireError{Code: int(protocol.ErrNotFound), Message: "subscription not found"})
		return
	}
	st.cancel()
	t.answer(id, struct{}{}, nil)
}

// post makes a POST of body with the connection's token (tok when set), and returns its
// answer when it is 200. A refusal ends the connection, but for a 401 to a token being checked
// (auth) and a 413, which are answered to request id; nil then.
func (t *httpTransport) post(ctx context.Context, id json.RawMessage, tok string, body []byte,
	meta map[string]string) *http.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		t.end(fmt.Errorf("client: POST %s: %w", t.url, err))
		return nil
	}
	checking := tok != ""
	if !checking {
		t.mu.Lock()
		tok = t.token
		t.mu.Unlock()
	}
	for k, vs := range t.header {
		req.Header[k] = slices.Clone(vs)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := meta[k]; v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			t.end(fmt.Errorf("%w: %w", errHTTPLost, err))
		}
		return nil
	}
	if resp.StatusCode == http.StatusOK {
		return resp
	}
	defer resp.Body.Close()
	why := problem(resp)
	switch {
	case resp.StatusCode == http.StatusUnauthorized && checking:
		t.answer(id, nil, &wireError{Code: int(protocol.ErrUnauthenticated), Message: why})
	case resp.StatusCode == http.StatusUnauthorized:
		// The gateway closes a WebSocket whose token expires so.
		t.end(websocket.CloseError{Code: protocol.CloseUnauthenticated, Reason: why})
	case resp.StatusCode == http.StatusRequestEntityTooLarge && len(id) > 0:
		t.answer(id, nil, &wireError{Code: rpc.ErrInvalidRequest.Code, Message: why})
	default:
		t.end(&HandshakeError{StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header, time.Now()),
			err: fmt.Errorf("client: POST %s: %s: %s", t.url, resp.Status, why)})
	}
	return nil
}

// problem is what a refusal's body says: an RFC 7807 problem's detail or title, or its status.
func problem(resp *http.Response) string {
	var p struct{ Title, Detail string }
	b, _ := io.ReadAll(io.LimitReader(resp.Body, problemBytes))
	if json.Unmarshal(b, &p) == nil {
		if p.Detail != "" {
			return p.Detail
		}
		if p.Title != "" {
			return p.Title
		}
	}
	return resp.Status
}

// silent returns a timer that ends the connection as a heartbeat timeout, running: the server
// is to answer within the time, and on an open response to send something (a heartbeat at
// least) every interval.
func (t *httpTransport) silent() *time.Timer {
	return time.AfterFunc(t.silence, func() { t.end(ErrHeartbeatTimeout) })
}

// silenceOf is how long the response of header may be silent: three of the heartbeat intervals
// it advertises (protocol.HeaderHeartbeatMs, as limits' heartbeat_ms on a WebSocket) or the
// client's, whichever is longer.
func (t *httpTransport) silenceOf(header http.Header) time.Duration {
	ms, err := strconv.ParseInt(header.Get(protocol.HeaderHeartbeatMs), 10, 64)
	if err != nil || ms <= 0 || ms > math.MaxInt64/int64(3*time.Millisecond) { // three of them must fit a Duration
		return t.silence
	}
	_, iv := heartbeats(t.user, time.Duration(ms)*time.Millisecond)
	return 3 * iv
}

// exchange POSTs one request and hands over its response's lines. st is set for a
// subscription's, which stays open, and whose end says whether the connection goes on.
func (t *httpTransport) exchange(ctx context.Context, id json.RawMessage, hasID bool, body []byte,
	meta map[string]string, st *httpStream) {
	silent := t.silent()
	defer silent.Stop()
	resp := t.post(ctx, id, "", body, meta)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	silence := t.silenceOf(resp.Header)
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	answered, over := false, false // a line with the request's id came; the response says it is over
	for {
		// Silence is counted while reading only, not while the connection's reader is behind.
		silent.Reset(silence)
		line, err := readLine(br, t.limit)
		silent.Stop()
		if len(line) > 0 {
			switch k := classify(line); k.kind {
			case lineHeartbeat:
				continue
			case lineClose:
				t.end(websocket.CloseError{Code: websocket.StatusCode(k.close), Reason: k.reason})
				return
			case lineClosed:
				over = true
			case lineAnswer:
				answered = true
				over = over || k.failed
			}
			if !t.deliver(line) {
				return
			}
		}
		switch {
		case err == nil:
			continue
		case ctx.Err() != nil:
			return // unsubscribed, or the connection ended
		case errors.Is(err, errLineTooLong):
			t.end(fmt.Errorf("client: over HTTP: %w (ReadLimit %d bytes)", err, t.limit))
		case !errors.Is(err, io.EOF):
			t.end(fmt.Errorf("%w: %w", errHTTPLost, err))
		case st != nil && !over, st == nil && hasID && !answered:
			t.end(fmt.Errorf("%w: a response ended without its answer, stream.closed or a close code", errHTTPLost))
		}
		return
	}
}

// errLineTooLong is a line longer than Options.ReadLimit.
var errLineTooLong = errors.New("a line of a response is too long")

// readLine reads one line, without its end; at the end of the body the last bytes come with
// io.EOF (a line not ended, which is lost).
func readLine(br *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if int64(len(line)+len(frag)) > limit+1 {
			return nil, errLineTooLong
		}
		line = append(line, frag...)
		switch {
		case err == nil:
			return bytes.TrimRight(line, "\r\n"), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, io.ErrUnexpectedEOF // a line cut
		}
		return nil, err
	}
}

// The kinds of line that matter to the transport.
const (
	lineOther     = iota // handed over
	lineHeartbeat        // $/heartbeat: a sign of life only
	lineClosed           // stream.closed: the response ends next, normally
	lineAnswer           // a response with an id
	lineClose            // an error without id: the server ended the connection
)

type lineKind struct {
	kind   int
	failed bool // lineAnswer: an error, which ends a subscription's response
	close  int  // lineClose: the WebSocket close code
	reason string
}

// notificationHead starts every notification the gateway writes: its method follows.
const notificationHead = `{"jsonrpc":"2.0","method":"`

// classify says what line is. The events, outputs and presence changes that make most lines
// are told by their head, without decoding them twice.
func classify(line []byte) lineKind {
	if rest, ok := bytes.CutPrefix(line, []byte(notificationHead)); ok {
		method, _, _ := bytes.Cut(rest, []byte(`"`))
		switch string(method) {
		case protocol.Heartbeat:
			return lineKind{kind: lineHeartbeat}
		case protocol.StreamClosed:
			return lineKind{kind: lineClosed}
		}
		return lineKind{kind: lineOther}
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Error  *struct {
			Code    int             `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(line, &m) != nil {
		return lineKind{kind: lineOther} // the connection's reader answers what does not parse
	}
	switch {
	case m.Method == protocol.Heartbeat:
		return lineKind{kind: lineHeartbeat}
	case m.Method == protocol.StreamClosed:
		return lineKind{kind: lineClosed}
	case m.Method != "":
		return lineKind{kind: lineOther}
	case len(m.ID) > 0 && string(m.ID) != "null":
		return lineKind{kind: lineAnswer, failed: m.Error != nil}
	case m.Error != nil:
		var d struct {
			Close int `json:"close"`
		}
		if json.Unmarshal(m.Error.Data, &d) == nil && d.Close != 0 {
			return lineKind{kind: lineClose, close: d.Close, reason: m.Error.Message}
		}
	}
	return lineKind{kind: lineOther}
}

// auth answers auth (or auth.refresh) request id: a system.ping with tok says whether the
// server takes it, and whose it is. Once it does, later POSTs carry it.
func (t *httpTransport) auth(id json.RawMessage, tok string, refresh bool, meta map[string]string) {
	silent := t.silent()
	defer silent.Stop()
	resp := t.post(t.ctx, id, tok, []byte(`{"jsonrpc":"2.0","id":1,"method":"system.ping","params":{}}`), meta)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	line, err := readLine(bufio.NewReader(resp.Body), t.limit)
	if err != nil {
		if t.ctx.Err() == nil {
			t.end(fmt.Errorf("%w: system.ping: %w", errHTTPLost, err))
		}
		return
	}
	var m struct {
		Result *protocol.PingResult `json:"result"`
		Error  json.RawMessage      `json:"error"`
	}
	switch {
	case json.Unmarshal(line, &m) != nil:
		t.end(fmt.Errorf("client: over HTTP: system.ping answered %q", line))
		return
	case len(m.Error) > 0 && string(m.Error) != "null":
		t.answer(id, nil, m.Error) // refused for a rate, say: the caller decides
		return
	case m.Result == nil:
		t.end(fmt.Errorf("client: over HTTP: system.ping answered %q", line))
		return
	}
	t.mu.Lock()
	if refresh && m.Result.Subject != t.subject {
		t.mu.Unlock()
		// As the gateway refuses it on a WebSocket.
		t.answer(id, nil, &wireError{Code: int(protocol.ErrUnauthenticated),
			Message: fmt.Sprintf("auth.refresh must keep the subject %q", t.subject)})
		return
	}
	t.token, t.subject = tok, m.Result.Subject
	t.mu.Unlock()
	t.answer(id, protocol.AuthResult{Subject: m.Result.Subject, ExpiresAt: tokenExpiry(tok, time.Now())}, nil)
}

// tokenExpiry reads a JWT's exp claim without verifying it (the server does): it only says
// when to refresh. A token whose expiry cannot be read is given unknownTokenLife from now.
func tokenExpiry(tok string, now time.Time) int64 {
	parts := strings.Split(tok, ".")
	if len(parts) == 3 {
		var claims struct {
			Exp float64 `json:"exp"`
		}
		if b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "=")); err == nil &&
			json.Unmarshal(b, &claims) == nil && claims.Exp > 0 {
			return int64(claims.Exp)
		}
	}
	return now.Add(unknownTokenLife).Unix()
}
