package provider

import (
	"context"
	"time"
)

// Retry describes a failed attempt of a model call that is about to be retried.
type Retry struct {
	Attempt int           // the retry's number: 1 for the first retry
	Err     error         // why the attempt before it failed (an *Error)
	Delay   time.Duration // the wait before the retry
}

type retryHookKey struct{}

// WithRetryHook returns a context under which the HTTP providers call fn before each retry
// of a call, on the calling goroutine, the way net/http/httptrace reports a request's steps.
// fn must be quick.
func WithRetryHook(ctx context.Context, fn func(Retry)) context.Context {
	return context.WithValue(ctx, retryHookKey{}, fn)
}

// retryHook returns the hook of ctx, or nil.
func retryHook(ctx context.Context) func(Retry) {
	fn, _ := ctx.Value(retryHookKey{}).(func(Retry))
	return fn
}
