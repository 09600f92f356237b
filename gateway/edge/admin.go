package edge

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// AdminOptions configure the admin port's handler.
type AdminOptions struct {
	// Metrics are what /metrics exports.
	Metrics prometheus.Gatherer
	// Draining, while true, fails /readyz with "draining".
	Draining func() bool
	// Ready checks the replica's dependencies for /readyz, within 2 s.
	Ready func(ctx context.Context) error
	// Pprof serves /debug/pprof/ (BALLET_PPROF).
	Pprof bool
}

// Admin serves the admin port: /metrics, /readyz, /healthz, and /debug/pprof/ when o.Pprof is
// set.
func Admin(o *AdminOptions) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(o.Metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if o.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := o.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	if o.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// readyTimeout bounds the checks of one GET /readyz (a ping of the database, AdminOptions.Ready):
// short, so that a probe sees a slow dependency as not ready rather than timing out itself.
const readyTimeout = 2 * time.Second
