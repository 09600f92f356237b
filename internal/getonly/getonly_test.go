package getonly_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ballet/gateway/internal/getonly"
)

func TestAllow(t *testing.T) {
	for _, tc := range []struct {
		method string
		ok     bool
	}{{http.MethodGet, true}, {http.MethodHead, true}, {http.MethodPost, false}, {http.MethodOptions, false}} {
		w := httptest.NewRecorder()
		ok := getonly.Allow(w, httptest.NewRequest(tc.method, "/", nil))
		if ok != tc.ok {
			t.Errorf("%s: allowed %v", tc.method, ok)
		}
		if !ok && (w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD") {
			t.Errorf("%s: %d, Allow %q", tc.method, w.Code, w.Header().Get("Allow"))
		}
		if ok && w.Code != http.StatusOK || ok && len(w.Header()) != 0 {
			t.Errorf("%s: answered %d %v", tc.method, w.Code, w.Header())
		}
	}
}
