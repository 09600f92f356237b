package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/cli"
	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// app runs one parsed command.
type app struct {
	cmd    *command
	stdout io.Writer
	stderr io.Writer

	mu sync.Mutex // serializes stderr and stdout lines
}

// errTurnFailed: the planner turn ended with an error.
var errTurnFailed = errors.New("the planner turn failed")

// oneShot reports whether the command ends by itself (a lost connection
// fails it rather than waiting for a reconnect).
func (a *app) oneShot() bool {
	return a.cmd.name == "ping" || a.cmd.name == "call" || a.cmd.name == "send"
}

func (a *app) run(ctx context.Context) int {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	first := true
	c, err := client.Dial(ctx, a.cmd.url, &client.Options{
		Token:     a.cmd.tokenSource(),
		Codec:     a.cmd.codec,
		Transport: a.cmd.transport,
		Logger: slog.New(slog.NewTextHandler(&lockedWriter{a: a}, &slog.HandlerOptions{
			Level: slog.LevelWarn,
		})),
		OnStateChange: func(s client.State, err error) {
			switch s {
			case client.StateConnected:
				if !first {
					a.errorf("reconnected")
				}
				first = false
			case client.StateReconnecting:
				switch {
				case a.oneShot():
					cancel(fmt.Errorf("%w: %v", client.ErrConnectionLost, err))
				case errors.Is(err, protocol.ErrUnauthenticated):
					cancel(err) // the token cannot be renewed: retrying will not help
				default:
					a.errorf("connection lost (%v); reconnecting", err)
				}
			}
		},
	})
	if err != nil {
		a.errorf("%v", describe(err))
		return exitConn
	}
	defer c.Close()
	switch a.cmd.name {
	case "ping":
		err = a.ping(ctx, c)
	case "call":
		err = a.call(ctx, c)
	case "subscribe":
		err = a.subscribe(ctx, c)
	case "watch":
		err = a.watch(ctx, c)
	case "send":
		err = a.send(ctx, c)
	}
	if err == nil {
		return cli.ExitOK
	}
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause // the connection was lost or refused
	}
	a.errorf("%v", describe(err))
	return exitCode(err)
}

// exitCode maps a command's error to the exit status.
func exitCode(err error) int {
	var ce *client.ClosedError
	switch {
	case errors.Is(err, protocol.ErrUnauthenticated), errors.Is(err, client.ErrConnectionLost):
		return exitConn
	case rpc.Code(err) != 0, errors.As(err, &ce), errors.Is(err, client.ErrSlowConsumer), errors.Is(err, errTurnFailed):
		return exitRPC
	}
	return exitConn
}

// describe adds the JSON-RPC code to an error from the server.
func describe(err error) string {
	var re *rpc.Error
	if errors.As(err, &re) {
		return fmt.Sprintf("error %d: %v", re.Code, err)
	}
	return err.Error()
}

// done ends a long-running command: interrupted is success.
func done(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

func (a *app) ping(ctx context.Context, c *client.Client) error {
	var res codec.RawJSON
	if err := c.Call(ctx, protocol.SystemPing, struct{}{}, &res); err != nil {
		return err
	}
	return a.printRaw(res)
}

func (a *app) call(ctx context.Context, c *client.Client) error {
	var params any
	if a.cmd.params != nil {
		params = a.cmd.params
	}
	var res codec.RawJSON
	if err := c.Call(ctx, a.cmd.args[0], params, &res); err != nil {
		return err
	}
	return a.printRaw(res)
}

func (a *app) subscribe(ctx context.Context, c *client.Client) error {
	stream := a.cmd.args[0]
	sub, err := c.Subscribe(ctx, stream, &client.SubscribeOptions{
		FromSeq: a.cmd.fromSeq,
		OnResync: func(seq int64) {
			a.errorf("%s: events were missed (resync required); continuing after seq %d: reload the snapshot", stream, seq)
		},
	})
	if err != nil {
		return err
	}
	if err := a.print(map[string]any{"subscription": sub.ID(), "seq": sub.Seq()}); err != nil {
		return err
	}
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				if sub.Err() == nil {
					return nil
				}
				return fmt.Errorf("%s: %w", stream, sub.Err())
			}
			if err := a.print(ev); err != nil {
				return err
			}
		case <-ctx.Done():
			a.unsubscribe(sub.ID(), c)
			return done(ctx)
		}
	}
}

func (a *app) watch(ctx context.Context, c *client.Client) error {
	session := a.cmd.args[0]
	w, err := c.PlannerWatch(ctx, session, &client.WatchOptions{
		OnResume: func(running bool) {
			a.errorf("watching %s again (running=%v): output in between was lost; reload the transcript", session, running)
		},
	})
	if err != nil {
		return err
	}
	if err := a.print(map[string]any{"subscription": w.ID(), "running": w.Running()}); err != nil {
		return err
	}
	_, err = a.outputs(ctx, w, false)
	a.unsubscribe(w.ID(), c)
	return err
}

func (a *app) send(ctx context.Context, c *client.Client) error {
	session, text := a.cmd.args[0], a.cmd.args[1]
	// Watch first so that no output of the turn is missed.
	w, err := c.PlannerWatch(ctx, session, nil)
	if err != nil {
		return err
	}
	defer a.unsubscribe(w.ID(), c)
	seq, err := c.PlannerSend(ctx, session, text, nil)
	if err != nil {
		return err
	}
	if err := a.print(map[string]any{"seq": seq}); err != nil {
		return err
	}
	last, err := a.outputs(ctx, w, true)
	if err == nil && last.Text == "error" {
		return errTurnFailed
	}
	return err
}

// outputs prints a watch's output; untilDone returns after "done".
func (a *app) outputs(ctx context.Context, w *client.Watch, untilDone bool) (client.PlannerOutput, error) {
	for {
		select {
		case out, ok := <-w.Output():
			if !ok {
				if w.Err() == nil {
					return out, nil
				}
				return out, fmt.Errorf("planner.watch %s: %w", w.Session(), w.Err())
			}
			if err := a.print(out); err != nil {
				return out, err
			}
			if untilDone && out.Type == client.OutputDone {
				return out, nil
			}
		case <-ctx.Done():
			return client.PlannerOutput{}, done(ctx)
		}
	}
}

func (a *app) unsubscribe(id string, c *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Unsubscribe(ctx, id)
}

// print writes v as one line of JSON.
func (a *app) print(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return a.line(b)
}

func (a *app) printRaw(raw codec.RawJSON) error {
	var buf bytes.Buffer
	if len(raw) == 0 {
		raw = codec.RawJSON("null")
	}
	if err := json.Compact(&buf, raw); err != nil {
		return err
	}
	return a.line(buf.Bytes())
}

func (a *app) line(b []byte) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err := a.stdout.Write(append(b, '\n'))
	return err
}

func (a *app) errorf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.stderr, "ballet-rpc: "+format+"\n", args...)
}

// lockedWriter sends the client's log lines to stderr between our own.
type lockedWriter struct{ a *app }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	return w.a.stderr.Write(p)
}
