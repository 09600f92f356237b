package planner

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/planner/provider"
)

// The planner's spans follow the OpenTelemetry conventions for generative AI: a turn is an
// invoke_agent span, each model call a chat span under it, each tool call an execute_tool
// span. The names below are the ones the conventions do not have.

// tracerName is the instrumentation scope of the planner's spans.
const tracerName = "github.com/ballet/gateway/planner"

// agentName is the gen_ai.agent.name of a turn.
const agentName = "planner"

// Span names.
const (
	spanTurn  = "invoke_agent " + agentName
	spanStale = "planner.turn.stale" // a replica ends the turn of one that died
)

// Attributes of the planner's own.
var (
	attrProject  = attribute.Key("ballet.project")                  // the session's project key
	attrTurn     = attribute.Key("ballet.planner.turn.id")          // Output.Turn
	attrDone     = attribute.Key("ballet.planner.turn.done_reason") // done's reason
	attrRounds   = attribute.Key("ballet.planner.turn.rounds")      // model calls that answered
	attrOutputs  = attribute.Key("ballet.planner.turn.outputs")     // outputs published
	attrPurpose  = attribute.Key("ballet.planner.model.purpose")    // purposeAnswer or purposeSummary
	attrRetries  = attribute.Key("ballet.planner.model.retries")    // retries within one model call
	attrAttempt  = attribute.Key("ballet.planner.model.retry.attempt")
	attrDelayMS  = attribute.Key("ballet.planner.model.retry.delay_ms")
	attrToolText = attribute.Key("ballet.planner.tool.is_error") // the tool's result is an error result
)

// Purposes of a model call.
const (
	purposeAnswer  = "answer"  // a round of the turn
	purposeSummary = "summary" // compaction of older messages
)

// Events.
const (
	eventRetry     = "retry"     // the provider retries the call
	eventCancelled = "cancelled" // the turn was cancelled during the call
)

// error.type values of the planner's own; model calls use provider.ErrorKind.
const (
	errTypeUnknownTool  = "unknown_tool"
	errTypeInvalidInput = "invalid_input"
	errTypeLeaseLost    = "lease_lost"
	errTypeShutdown     = "shutdown"
	errTypeStale        = "replica_stopped"
)

// toolErrorType returns the error.type of a tool call that failed with err: invalid_input, or
// the kind of the tracker's refusal (fault.ErrorType).
func toolErrorType(err error) string {
	var ie *inputError
	if errors.As(err, &ie) {
		return errTypeInvalidInput
	}
	return fault.ErrorType(err)
}

// modelAttrs are the attributes of a model call known before it starts.
func (s *Service) modelAttrs() []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIProviderNameKey.String(s.prov.Name()),
		semconv.GenAIRequestModel(s.prov.Model()),
	}
}

// maxTraceState bounds the tracestate kept with a lease, in bytes: what W3C Trace Context asks
// every vendor to pass on. A longer one is not kept.
const maxTraceState = 512

// traceContextOf returns the W3C headers of sc, none when it is invalid.
func traceContextOf(sc trace.SpanContext) TraceContext {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	tc := TraceContext{Parent: carrier.Get("traceparent"), State: carrier.Get("tracestate")}
	if len(tc.State) > maxTraceState {
		tc.State = ""
	}
	return tc
}

// spanContextOf parses tc, as a span context of another process; invalid when tc is.
func spanContextOf(tc TraceContext) trace.SpanContext {
	carrier := propagation.MapCarrier{"traceparent": tc.Parent, "tracestate": tc.State}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
}

// startStale starts the span of ending the turn of lease l, whose replica died, in the trace
// of the send that started the turn, linked to ctx's span (of a send that found the lease).
// The ctx it returns is not cancelled with ctx.
func (s *Service) startStale(ctx context.Context, l Lease, turn string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIConversationID(l.Session),
		attrTurn.String(turn),
		attrDone.String(DoneError),
		semconv.ErrorTypeKey.String(errTypeStale),
	)}
	if link := trace.LinkFromContext(ctx); link.SpanContext.IsValid() {
		opts = append(opts, trace.WithLinks(link))
	}
	parent := trace.ContextWithRemoteSpanContext(context.WithoutCancel(ctx), spanContextOf(l.Trace))
	ctx, span := s.tracer.Start(parent, spanStale, opts...)
	span.SetStatus(codes.Error, StaleText)
	return ctx, span
}

// startTurn starts the span of turn t, in the trace of the send that started it, and returns
// the turn's context under it.
func (s *Service) startTurn(t *turn) (context.Context, trace.Span) {
	parent := trace.ContextWithSpanContext(t.ctx, t.parent)
	attrs := append(s.modelAttrs(),
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(agentName),
		semconv.GenAIConversationID(t.session.ID),
		attrProject.String(t.session.Project),
		attrTurn.String(t.id),
	)
	return s.tracer.Start(parent, spanTurn, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// endTurn ends the span of t with done's reason; text is the error text watchers got.
func endTurn(t *turn, reason, text string) {
	sp := t.span
	t.pubMu.Lock()
	outputs := t.offset
	t.pubMu.Unlock()
	sp.SetAttributes(attrDone.String(reason), attrRounds.Int(t.rounds), attrOutputs.Int64(outputs),
		semconv.GenAIUsageInputTokens(t.usage.InputTokens), semconv.GenAIUsageOutputTokens(t.usage.OutputTokens))
	cause := context.Cause(t.ctx)
	switch {
	case errors.Is(cause, errLeaseLost) || errors.Is(cause, errKilled):
		sp.SetAttributes(semconv.ErrorTypeKey.String(errTypeLeaseLost))
		sp.SetStatus(codes.Error, "the turn lost its lease")
	case reason == DoneError:
		if t.errType == "" {
			t.errType = semconv.ErrorTypeOther.Value.AsString()
		}
		sp.SetAttributes(semconv.ErrorTypeKey.String(t.errType))
		sp.SetStatus(codes.Error, text)
	}
	sp.End()
}

// failed records on t's span the error.type of the error that ends the turn.
func (t *turn) failed(err error) {
	switch cause := context.Cause(t.ctx); {
	case errors.Is(cause, errShutdown):
		t.errType = errTypeShutdown
	case t.ctx.Err() != nil:
	case errors.As(err, new(*provider.Error)), errors.Is(err, provider.ErrMalformed):
		t.errType = provider.ErrorKind(err)
	}
}

// startModelCall starts the span of one model call of t and returns ctx under it, which
// also counts the provider's retries on the span.
func (s *Service) startModelCall(ctx context.Context, t *turn, purpose string, req *provider.Request) (context.Context, *modelSpan) {
	attrs := append(s.modelAttrs(),
		semconv.GenAIOperationNameChat,
		semconv.GenAIConversationID(t.session.ID),
		semconv.GenAIRequestMaxTokens(maxTokens(req)),
		attrPurpose.String(purpose),
	)
	ctx, sp := s.tracer.Start(ctx, "chat "+s.prov.Model(), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	m := &modelSpan{span: sp}
	if sp.IsRecording() {
		ctx = provider.WithRetryHook(ctx, m.retry)
	}
	return ctx, m
}

// modelSpan is the span of one model call, with its retries so far; it is used on the
// goroutine of the call only.
type modelSpan struct {
	span    trace.Span
	retries int
}

func (m *modelSpan) retry(r provider.Retry) {
	m.retries = r.Attempt
	m.span.AddEvent(eventRetry, trace.WithAttributes(attrAttempt.Int(r.Attempt),
		attrDelayMS.Int64(r.Delay.Milliseconds()), semconv.ErrorTypeKey.String(provider.ErrorKind(r.Err))))
}

// end ends the span with the call's outcome; cancelled is set when the turn ended meanwhile.
func (m *modelSpan) end(resp *provider.Response, err error, cancelled bool) {
	sp := m.span
	sp.SetAttributes(attrRetries.Int(m.retries))
	switch {
	case cancelled:
		sp.AddEvent(eventCancelled)
	case err != nil:
		sp.SetAttributes(semconv.ErrorTypeKey.String(provider.ErrorKind(err)))
		sp.SetStatus(codes.Error, err.Error()) // provider errors never hold the API key
	default:
		sp.SetAttributes(semconv.GenAIUsageInputTokens(resp.Usage.InputTokens),
			semconv.GenAIUsageOutputTokens(resp.Usage.OutputTokens))
		if resp.StopReason != "" {
			sp.SetAttributes(semconv.GenAIResponseFinishReasons(resp.StopReason))
		}
	}
	sp.End()
}

// startToolCall starts the span of one tool call.
func (tb *toolbox) startToolCall(ctx context.Context, c ToolCall) (context.Context, trace.Span) {
	return tb.svc.tracer.Start(ctx, "execute_tool "+c.Name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(c.Name),
		semconv.GenAIToolCallID(c.ID),
		semconv.GenAIToolType("function"),
	))
}

// endToolCall ends a tool call's span; errType is set when the call failed.
func endToolCall(sp trace.Span, r ToolResult, errType string) {
	sp.SetAttributes(attrToolText.Bool(r.IsError))
	if errType != "" {
		sp.SetAttributes(semconv.ErrorTypeKey.String(errType))
		sp.SetStatus(codes.Error, errType)
	}
	sp.End()
}

func maxTokens(req *provider.Request) int {
	if req.MaxTokens > 0 {
		return req.MaxTokens
	}
	return provider.DefaultMaxTokens
}
