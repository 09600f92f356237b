package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The planner mode plays the model itself: an HTTP server speaking the Anthropic Messages
// API's streaming format (POST /v1/messages, text/event-stream), to which the replicas'
// BALLET_PLANNER_BASE_URL points. Each request belongs to one of the run's turns, named by
// the marker its last human message carries; the answer is one text block of
// --outputs-per-second × --turn-seconds text deltas, paced at --outputs-per-second, each
// delta's text a stamp "[N@T]": N the delta's number within the turn (from 0), T the time it
// was written, in ns of this process' monotonic clock (nowNs). Watchers parse the stamps
// back out of planner.output text, however the gateway splits or merges deltas.

// turnMarker prefixes the run id and turn number in the message the bench sends.
const turnMarker = "ballet-bench-turn "

// maxModelRequestBytes bounds a request body the model server reads.
const maxModelRequestBytes = 16 << 20

// modelServer is the fake model.
type modelServer struct {
	runID    string
	deltas   int           // deltas per answer
	interval time.Duration // between deltas
	turns    int

	srv *http.Server
	ln  net.Listener
	wg  sync.WaitGroup // Serve

	requests                  atomic.Int64 // answered requests
	firstRequest, lastRequest atomic.Int64 // nowNs of the first and last answered request
	unknown                   atomic.Int64 // requests naming no turn of the run
	aborted                   atomic.Int64 // answers whose client went away before the end
	emitted                   []atomic.Int64
	behind                    atomic.Int64 // deltas written more than an interval after their time
	firstEmit                 atomic.Int64 // nowNs of the first delta written
	lastEmit                  atomic.Int64
}

// startModel serves on ln until close.
func startModel(ln net.Listener, runID string, turns, deltas int, interval time.Duration) *modelServer {
	m := &modelServer{runID: runID, deltas: deltas, interval: interval, turns: turns, ln: ln,
		emitted: make([]atomic.Int64, turns)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", m.messages)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		_ = m.srv.Serve(ln)
	}()
	return m
}

// close stops the server and every answer still streaming.
func (m *modelServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if m.srv.Shutdown(ctx) != nil {
		_ = m.srv.Close()
	}
	m.wg.Wait()
}

// turnOf finds the last marker of this run in a request body; -1 when there is none.
func (m *modelServer) turnOf(body []byte) int {
	mark := []byte(turnMarker + m.runID + "-")
	i := bytes.LastIndex(body, mark)
	if i < 0 {
		return -1
	}
	rest := body[i+len(mark):]
	n := 0
	for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	t, err := strconv.Atoi(string(rest[:n]))
	if err != nil || t < 0 || t >= m.turns {
		return -1
	}
	return t
}

func (m *modelServer) messages(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxModelRequestBytes))
	turn := -1
	if err == nil {
		turn = m.turnOf(body)
	}
	if turn < 0 {
		m.unknown.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"no turn of this run"}}`)
		return
	}
	m.requests.Add(1)
	t0 := nowNs()
	m.firstRequest.CompareAndSwap(0, t0)
	for {
		if last := m.lastRequest.Load(); t0 <= last || m.lastRequest.CompareAndSwap(last, t0) {
			break
		}
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	msgID := fmt.Sprintf("msg_%s_%d", m.runID, turn)
	var buf []byte
	send := func(name string, v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf = append(buf[:0], "event: "...)
		buf = append(buf, name...)
		buf = append(buf, "\ndata: "...)
		buf = append(buf, data...)
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	type obj = map[string]any
	err = errors.Join(
		send("message_start", obj{"type": "message_start", "message": obj{
			"id": msgID, "type": "message", "role": "assistant", "model": "ballet-bench", "content": []any{},
			"stop_reason": nil, "usage": obj{"input_tokens": len(body) / 4, "output_tokens": 1}}}),
		send("content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": obj{"type": "text", "text": ""}}),
	)
	start := time.Now()
	for n := 0; err == nil && n < m.deltas; n++ {
		due := start.Add(time.Duration(n) * m.interval)
		if err = sleepUntil(r.Context(), due); err != nil {
			break
		}
		if time.Since(due) > m.interval {
			// The replica reads the stream late: the writes before this one waited on it.
			m.behind.Add(1)
		}
		t := nowNs()
		// The stamps need no JSON escaping: written by hand, as the run's hottest write.
		buf = append(buf[:0], "event: content_block_delta\ndata: "+
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`...)
		buf = append(buf, stamp(n, t)...)
		buf = append(buf, "\"}}\n\n"...)
		if _, err = w.Write(buf); err == nil && fl != nil {
			fl.Flush()
		}
		if err == nil {
			m.emitted[turn].Add(1)
			m.firstEmit.CompareAndSwap(0, t)
			m.lastEmit.Store(t)
		}
	}
	if err == nil {
		err = errors.Join(
			send("content_block_stop", obj{"type": "content_block_stop", "index": 0}),
			send("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": "end_turn", "stop_sequence": nil},
				"usage": obj{"output_tokens": m.deltas}}),
			send("message_stop", obj{"type": "message_stop"}),
		)
	}
	if err != nil {
		m.aborted.Add(1)
	}
}

// stamp is the text of delta n written at t.
func stamp(n int, t int64) string {
	return "[" + strconv.Itoa(n) + "@" + strconv.FormatInt(t, 10) + "]"
}

// parseStamps calls f for every well-formed stamp in text, in order; it returns how many
// bytes of text were not part of a stamp.
func parseStamps(text string, f func(n int, t int64)) (junk int) {
	for i := 0; i < len(text); {
		if text[i] != '[' {
			junk++
			i++
			continue
		}
		j := i + 1
		n, j, okN := digits64(text, j)
		if okN && j < len(text) && text[j] == '@' {
			var t int64
			var okT bool
			t, j, okT = digits64(text, j+1)
			if okT && j < len(text) && text[j] == ']' {
				f(int(n), t)
				i = j + 1
				continue
			}
		}
		junk++
		i++
	}
	return junk
}

// digits64 reads a decimal number at s[i:] (at most 18 digits).
func digits64(s string, i int) (int64, int, bool) {
	var v int64
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' && i-start < 18 {
		v = v*10 + int64(s[i]-'0')
		i++
	}
	return v, i, i > start
}
