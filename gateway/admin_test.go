package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// TestAdminPprof: the admin port serves /debug/pprof/ only with Config.Pprof (BALLET_PPROF).
func TestAdminPprof(t *testing.T) {
	for _, tc := range []struct {
		name  string
		pprof bool
		want  int
	}{{"off by default", false, http.StatusNotFound}, {"on", true, http.StatusOK}} {
		t.Run(tc.name, func(t *testing.T) {
			env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{Pprof: tc.pprof}})
			admin := httptest.NewServer(env.Server.AdminHandler())
			defer admin.Close()
			for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/heap?gc=1"} {
				resp, err := http.Get(admin.URL + p)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("GET %s: %d, want %d", p, resp.StatusCode, tc.want)
				}
			}
			resp, err := http.Get(admin.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("GET /metrics: %d", resp.StatusCode)
			}
		})
	}
}
