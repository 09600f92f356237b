package provider_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/ballet/gateway/planner/provider"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestErrorKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&provider.Error{Provider: "anthropic", Status: 429, Type: "rate_limit_error"}, "rate_limited"},
		{&provider.Error{Provider: "anthropic", Type: "rate_limit_error"}, "rate_limited"},
		{&provider.Error{Provider: "anthropic", Status: 529, Type: "overloaded_error"}, "overloaded"},
		{&provider.Error{Provider: "anthropic", Type: "overloaded_error"}, "overloaded"},
		{&provider.Error{Provider: "openai", Status: 503}, "server"},
		{&provider.Error{Provider: "anthropic", Type: "api_error"}, "server"},
		{&provider.Error{Provider: "openai", Status: 401, Type: "invalid_api_key"}, "auth"},
		{&provider.Error{Provider: "openai", Status: 400, Type: "invalid_request_error"}, "other"},
		{&provider.Error{Provider: "openai", Type: "connection_error", Err: errors.New("refused")}, "connection"},
		{&provider.Error{Provider: "openai", Type: "connection_error", Err: timeoutErr{}}, "timeout"},
		{fmt.Errorf("anthropic: %w: bad json", provider.ErrMalformed), "malformed"},
		{fmt.Errorf("summarize: %w", &provider.Error{Provider: "openai", Status: 429}), "rate_limited"},
		{context.DeadlineExceeded, "timeout"},
		{errors.New("encode request"), "other"},
	} {
		if got := provider.ErrorKind(c.err); got != c.want {
			t.Errorf("%v: %s, want %s", c.err, got, c.want)
		}
	}
}
