package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/protocol"
)

// An HTTP subscriber (--transport http) holds one POST /rpc whose one request is its
// stream.subscribe: the response streams NDJSON lines (replayed events, the answer, then the
// subscription's notifications and the server's heartbeats) until the subscription ends or the
// subscriber closes the request. Its connection is written once (the request) and then only
// read, through one buffered reader, by the client's reader goroutine as a WebSocket's is: each
// line is a frame for classify, so the checks are the same.

// Transports of the subscribers (--transport).
const (
	transportWebSocket = "websocket"
	transportHTTP      = "http"
)

// httpRequestID is the id of an HTTP subscriber's one request.
const httpRequestID = 1

// httpStream is a wsConn of a streamed POST /rpc response: readMessage returns its next line.
type httpStream struct {
	nc    net.Conn
	lines *bufio.Reader // the response's body, the chunked coding removed
	limit int
	long  []byte // a line longer than the reader's buffer, gathered
	// done: the server ended the response as the protocol says (stream.closed, or the request's
	// error); end: it ended it with an error object without id. Written by the reader only.
	done bool
	end  *closeError
}

// errResponseDone ends the reading of a response whose end the protocol announced: no lost
// connection.
var errResponseDone = errors.New("the response ended after its subscription ended")

// errNothingToSend: a streamed response's connection carries nothing after the request.
var errNothingToSend = errors.New("nothing is sent on a POST /rpc after its request")

// Prefixes of the lines read most: events, then heartbeats; the others are decoded in full.
var heartbeatPrefix = []byte(`{"jsonrpc":"2.0","method":"` + protocol.Heartbeat + `"`)

// readMessage returns the next line without its newline. A line that fits the reader's buffer
// is returned from it, valid until the next call, and buf is not used: nothing is copied. The
// error object without id that ends a response is no frame of the session: it gives the end's
// close code instead.
func (s *httpStream) readMessage(_ []byte) ([]byte, error) {
	for {
		line, err := s.lines.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.long = append(s.long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.lines.ReadSlice('\n')
				s.long = append(s.long, line...)
				if len(s.long) > s.limit {
					return nil, fmt.Errorf("a line of more than %d bytes", s.limit)
				}
			}
			line = s.long
		}
		if err != nil {
			return nil, s.ended(err)
		}
		line = line[:len(line)-1]
		if bytes.HasPrefix(line, jsonEventPrefix) || bytes.HasPrefix(line, heartbeatPrefix) || !s.last(line) {
			return line, nil
		}
	}
}

// endLine is what the lines that may end a response say of it.
type endLine struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Error  *struct {
		Data struct {
			Close int `json:"close"`
		} `json:"data"`
	} `json:"error"`
}

// last notes what a line says of the response's end, and reports whether it is the error
// object without id that ends it.
func (s *httpStream) last(line []byte) bool {
	var m endLine
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	noID := len(m.ID) == 0 || string(m.ID) == "null"
	switch {
	case m.Method == protocol.StreamClosed:
		s.done = true
	case m.Method == "" && m.Error != nil && !noID:
		s.done = true // the request refused: its answer is the last line
	case m.Method == "" && m.Error != nil:
		s.end = &closeError{code: m.Error.Data.Close}
		return true
	}
	return false
}

// ended is the error that ends the reading: the close code the server's last line gave, or the
// announced end, or what broke the response.
func (s *httpStream) ended(err error) error {
	if !errors.Is(err, io.EOF) {
		return err // cut: io.ErrUnexpectedEOF from the chunked coding, or the socket's error
	}
	switch {
	case s.end != nil:
		return s.end
	case s.done:
		return errResponseDone
	}
	return errors.New("the response ended without stream.closed or an error")
}

func (s *httpStream) write(context.Context, []byte) error { return errNothingToSend }

func (s *httpStream) closeNow() error { return s.nc.Close() }

// httpURL is u, a /rpc URL, with the scheme of HTTP: ws becomes http, wss https.
func httpURL(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return "", err
	}
	switch pu.Scheme {
	case "ws":
		pu.Scheme = "http"
	case "wss":
		pu.Scheme = "https"
	}
	return pu.String(), nil
}

// dialHTTP opens subscriber idx over POST /rpc: its stream.subscribe is sent, and its events are
// tracked in tr from the first line. It returns once the answer came.
func (b *bench) dialHTTP(ctx context.Context, idx int, subID string, tr *tracker, fromSeq *int64) (*client, int64, error) {
	params, err := json.Marshal(subscribeParams{Subscription: subID, Stream: b.cfg.streamName, FromSeq: fromSeq})
	if err != nil {
		return nil, 0, err
	}
	body, err := codec.JSON.Encode(nil, &codec.Message{ID: httpRequestID, HasID: true, Method: protocol.StreamSubscribe, Params: params})
	if err != nil {
		return nil, 0, err
	}
	s, err := b.post(ctx, body)
	if err != nil {
		return nil, 0, fmt.Errorf("POST %s: %w", b.cfg.url, err)
	}
	ch := make(chan callResult, 1)
	c := &client{
		b: b, idx: idx, ws: s, codec: codec.JSON, overHTTP: true,
		calls: map[int64]pendingCall{httpRequestID: {ch: ch}},
		quit:  make(chan struct{}), done: make(chan struct{}),
	}
	c.sub.Store(&subState{id: subID, tr: tr})
	go c.readLoop()
	seq, err := c.subscribeResult(ctx, ch)
	if err != nil {
		c.close()
		return nil, 0, err
	}
	return c, seq, nil
}

// post sends body to --url and reads the response's head: a stream of lines, or the refusal as
// an error.
func (b *bench) post(ctx context.Context, body []byte) (*httpStream, error) {
	pu, err := url.Parse(b.cfg.url)
	if err != nil {
		return nil, err
	}
	host := pu.Host
	if pu.Port() == "" {
		port := "80"
		if pu.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(pu.Hostname(), port)
	}
	dial := (&net.Dialer{}).DialContext
	if src := b.cfg.sourceDialer(); src != nil {
		dial = src.DialContext
	}
	nc, err := dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if pu.Scheme == "https" {
		nc = tls.Client(nc, &tls.Config{ServerName: pu.Hostname()})
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	s, err := b.request(nc, pu, body)
	if err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return s, nil
}

// request writes the request on nc and reads the response's head.
func (b *bench) request(nc net.Conn, pu *url.URL, body []byte) (*httpStream, error) {
	req := make([]byte, 0, 256+len(b.token)+len(body))
	req = append(req, "POST "+pu.RequestURI()+" HTTP/1.1\r\nHost: "+pu.Host+"\r\nAuthorization: Bearer "...)
	req = append(req, b.token...)
	req = append(req, "\r\nContent-Type: application/json\r\nAccept: application/x-ndjson\r\nContent-Length: "...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(append(req, "\r\n\r\n"...), body...)
	if _, err := nc.Write(req); err != nil {
		return nil, err
	}
	// 4 KiB buffers, as the WebSocket library's: thousands of idle subscribers hold them.
	br := bufio.NewReaderSize(nc, 4<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		detail, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(detail))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/x-ndjson" {
		resp.Body.Close()
		return nil, fmt.Errorf("Content-Type %q, want application/x-ndjson", resp.Header.Get("Content-Type"))
	}
	return &httpStream{nc: nc, lines: bufio.NewReaderSize(resp.Body, 4<<10), limit: 1<<20 + 2*b.cfg.payloadBytes}, nil
}
