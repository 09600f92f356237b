package tracing

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// QueryTracer records a client span for each query run under a span (pgx.QueryTracer): the
// database work of a request, a turn or a tool call. A query with no span in its context,
// the tailer's polls and LISTEN, say, records nothing, so that only work someone asked for
// is traced.
type QueryTracer struct {
	tracer trace.Tracer
}

var _ pgx.QueryTracer = (*QueryTracer)(nil)

// NewQueryTracer returns a QueryTracer recording into tp.
func NewQueryTracer(tp trace.TracerProvider) *QueryTracer {
	return &QueryTracer{tracer: tp.Tracer("github.com/ballet/gateway/internal/tracing")}
}

// TraceQueryStart starts the query's span when its context has one.
func (t *QueryTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return ctx
	}
	op := operation(data.SQL)
	attrs := []attribute.KeyValue{semconv.DBSystemNamePostgreSQL, semconv.DBQueryText(data.SQL)}
	if op != "" {
		attrs = append(attrs, semconv.DBOperationName(op))
	}
	if conn != nil {
		if cfg := conn.Config(); cfg != nil {
			attrs = append(attrs, semconv.DBNamespace(cfg.Database), semconv.ServerAddress(cfg.Host),
				semconv.ServerPort(int(cfg.Port)))
		}
	}
	name := op
	if name == "" {
		name = "postgresql"
	}
	ctx, _ = t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx
}

// TraceQueryEnd ends the query's span with its outcome.
func (t *QueryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if data.Err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(data.Err)))
		span.SetStatus(codes.Error, data.Err.Error())
	} else if n := data.CommandTag.RowsAffected(); n > 0 || data.CommandTag.Select() {
		span.SetAttributes(semconv.DBResponseReturnedRows(int(n)))
	}
	span.End()
}

// operation is a statement's first word, upper-cased (SELECT, INSERT, WITH), or "".
func operation(sql string) string {
	sql = strings.TrimSpace(sql)
	end := strings.IndexFunc(sql, func(r rune) bool { return r == ' ' || r == '\n' || r == '\t' || r == '(' || r == ';' })
	if end < 0 {
		end = len(sql)
	}
	if end == 0 || end > 16 {
		return ""
	}
	return strings.ToUpper(sql[:end])
}

// errorType is the SQLSTATE of a Postgres error, "canceled" or "timeout" for a context's
// end, else "_OTHER".
func errorType(err error) string {
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg):
		return pg.Code
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	return "_OTHER"
}
