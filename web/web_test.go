package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// builtAssets returns the asset paths dist/build.json lists.
func builtAssets(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("dist/build.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Assets []string `json:"assets"`
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Assets
}

func TestHandlerServesThePage(t *testing.T) {
	h := Handler()
	for _, path := range []string{"/", "/index.html"} {
		res := get(t, h, "GET", path, nil)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		for k, want := range map[string]string{
			"Content-Type":           "text/html; charset=utf-8",
			"Cache-Control":          "no-cache",
			"X-Content-Type-Options": "nosniff",
		} {
			if got := res.Header.Get(k); got != want {
				t.Errorf("GET %s: %s = %q, want %q", path, k, got, want)
			}
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy = %q", path, csp)
		}
		if res.Header.Get("ETag") == "" {
			t.Errorf("GET %s: no ETag", path)
		}
		page := body(t, res)
		if !strings.Contains(page, `id="columns"`) {
			t.Errorf("GET %s: not the board page:\n%s", path, page)
		}
		for _, a := range builtAssets(t) {
			if !strings.Contains(page, `"`+a+`"`) {
				t.Errorf("GET %s: the page does not reference %s", path, a)
			}
		}
	}
}

func TestHandlerServesAssets(t *testing.T) {
	h := Handler()
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	assets := builtAssets(t)
	if len(assets) != 2 {
		t.Fatalf("assets = %v", assets)
	}
	for _, a := range assets {
		path := "/" + a
		res := get(t, h, "GET", path, nil)
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
		ext := a[strings.LastIndex(a, "."):]
		if got := res.Header.Get("Content-Type"); got != types[ext] {
			t.Errorf("GET %s: Content-Type = %q, want %q", path, got, types[ext])
		}
		if got := res.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s: Cache-Control = %q", path, got)
		}
		if res.Header.Get("Content-Security-Policy") != "" {
			t.Errorf("GET %s: a CSP on an asset", path)
		}
		plain := body(t, res)
		want, err := os.ReadFile("dist/" + a)
		if err != nil {
			t.Fatal(err)
		}
		if plain != string(want) {
			t.Errorf("GET %s: body differs from dist", path)
		}

		// Revalidation.
		etag := res.Header.Get("ETag")
		res = get(t, h, "GET", path, http.Header{"If-None-Match": {etag}})
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match %s: %d, want 304", path, etag, res.StatusCode)
		}

		// Compression.
		res = get(t, h, "GET", path, http.Header{"Accept-Encoding": {"br, gzip;q=0.8"}})
		if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("GET %s with gzip: Content-Encoding %q, Vary %q", path, res.Header.Get("Content-Encoding"), res.Header.Get("Vary"))
		}
		if res.Header.Get("ETag") == etag {
			t.Errorf("GET %s: the gzip variant has the same ETag", path)
		}
		zr, err := gzip.NewReader(bytes.NewReader([]byte(body(t, res))))
		if err != nil {
			t.Fatal(err)
		}
		unz, err := io.ReadAll(zr)
		if err != nil || string(unz) != plain {
			t.Errorf("GET %s: gzip body does not decompress to the asset (%v)", path, err)
		}
		res = get(t, h, "GET", path, http.Header{"Accept-Encoding": {"gzip;q=0"}})
		if res.Header.Get("Content-Encoding") != "" {
			t.Errorf("GET %s: gzip;q=0 got Content-Encoding %q", path, res.Header.Get("Content-Encoding"))
		}

		res = get(t, h, "HEAD", path, nil)
		if res.StatusCode != 200 || body(t, res) != "" || res.Header.Get("Content-Length") != itoa(len(want)) {
			t.Errorf("HEAD %s: %d, Content-Length %q", path, res.StatusCode, res.Header.Get("Content-Length"))
		}
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestHandlerRefuses(t *testing.T) {
	h := Handler()
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", 404},
		{"GET", "/build.json", 404},
		{"GET", "/assets/", 404},
		{"GET", "/assets/../index.html", 404},
		{"GET", "/rpc", 404},
		{"POST", "/", 405},
		{"DELETE", "/index.html", 405},
	} {
		res := get(t, h, tc.method, tc.path, nil)
		if res.StatusCode != tc.status {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, res.StatusCode, tc.status)
		}
		if tc.status == 405 && res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow = %q", tc.method, tc.path, res.Header.Get("Allow"))
		}
	}
}

func TestAcceptsGzip(t *testing.T) {
	for v, want := range map[string]bool{
		"":                  false,
		"gzip":              true,
		"GZIP":              true,
		"deflate, gzip":     true,
		"gzip;q=0":          false,
		"gzip; q=0.000":     false,
		"gzip;q=0.1":        true,
		"br":                false,
		"identity, x-gzip2": false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if v != "" {
			r.Header.Set("Accept-Encoding", v)
		}
		if got := acceptsGzip(r); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", v, got, want)
		}
	}
}
