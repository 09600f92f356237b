package edge

import (
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"
)

// AccessLogOptions configure AccessLog.
type AccessLogOptions struct {
	Logger     *slog.Logger
	Timeout    time.Duration // RESTTimeout: each request's time, reading and answering
	WriteStall time.Duration // RESTWriteStall: the longest a write of the answer may wait
	// Serve serves r on w, and returns its trace id, or "" when it has none.
	Serve func(w *StatusWriter, r *http.Request) (traceID string)
}

// AccessLog bounds each request's time (Timeout), and each write of its answer to WriteStall,
// and logs it with its outcome and its trace id.
func AccessLog(o *AccessLogOptions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rc := http.NewResponseController(w)
		end := start.Add(o.Timeout)
		_ = rc.SetReadDeadline(end)
		_ = rc.SetWriteDeadline(end)
		sw := &StatusWriter{ResponseWriter: w, Status: http.StatusOK, rc: rc, end: end, stall: o.WriteStall}
		tid := o.Serve(sw, r)
		attrs := []any{"method", r.Method, "path", loggedPath(r.URL.Path), "status", sw.Status,
			"duration_ms", float64(time.Since(start).Microseconds()) / 1000, "remote", r.RemoteAddr}
		if tid != "" {
			attrs = append(attrs, "trace_id", tid)
		}
		o.Logger.Info("http request", attrs...)
	})
}

// maxLoggedPath is the most characters of a path the access log writes: a client's path may
// be as long as the headers' limit (64 KiB), and the log is no place for it.
const maxLoggedPath = 1024

// loggedPath is p cut to maxLoggedPath characters, the cut marked with "…".
func loggedPath(p string) string {
	if utf8.RuneCountInString(p) <= maxLoggedPath {
		return p
	}
	end := 0
	for range maxLoggedPath {
		_, size := utf8.DecodeRuneInString(p[end:])
		end += size
	}
	return p[:end] + "…"
}

// StatusWriter records an answer's status, and, made by AccessLog, gives each of its writes
// until the write stall from its start (but not past the request's end): a client that takes
// nothing of the answer for that long fails the write, which ends the answer and its
// connection, so that what the handler holds for the answer is let go rather than held to the
// end of the request's time.
type StatusWriter struct {
	http.ResponseWriter
	Status int
	rc     *http.ResponseController // nil where no stall applies (NewStatusWriter)
	end    time.Time                // the request's deadline
	stall  time.Duration            // the longest a write may wait for the client
}

// NewStatusWriter records the status of w's answer, without deadlines of its own.
func NewStatusWriter(w http.ResponseWriter) *StatusWriter {
	return &StatusWriter{ResponseWriter: w, Status: http.StatusOK}
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if dl := time.Now().Add(w.stall); w.rc != nil && dl.Before(w.end) {
		_ = w.rc.SetWriteDeadline(dl)
	}
	return w.ResponseWriter.Write(b)
}

// WriteHeader records code and sends it.
func (w *StatusWriter) WriteHeader(code int) {
	w.Status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
