package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/ballet/gateway/internal/getonly"
)

//go:embed all:dist
var dist embed.FS

// contentTypes maps the extensions the build emits to their media types.
var contentTypes = map[string]string{
	".html":  "text/html; charset=utf-8",
	".js":    "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// contentSecurityPolicy limits the board to its own origin: scripts and
// styles from files only, fetch and WebSocket to the same server.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self' ws: wss:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Cache-Control values: the page is revalidated on every load, the assets it
// names carry their content hash in their file names and never change.
const (
	cacheRevalidate = "no-cache"
	cacheImmutable  = "public, max-age=31536000, immutable"
)

// asset is one file of dist, ready to serve.
type asset struct {
	name  string
	data  []byte
	gz    []byte // gzip-compressed data, or nil when compression does not pay
	ctype string
	etag  string // strong validator of data; gzip adds a suffix
	cache string
	page  bool // the HTML page: security headers
}

var assets = sync.OnceValue(load)

// load reads every file of dist except build.json (the build's record).
func load() map[string]*asset {
	m := map[string]*asset{}
	err := fs.WalkDir(dist, "dist", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel := strings.TrimPrefix(p, "dist/")
		if rel == "build.json" {
			return nil
		}
		data, err := dist.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		a := &asset{
			name: path.Base(rel), data: data, ctype: contentTypes[path.Ext(rel)],
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`, cache: cacheRevalidate,
			page: path.Ext(rel) == ".html",
		}
		if a.ctype == "" {
			a.ctype = "application/octet-stream"
		}
		if strings.HasPrefix(rel, "assets/") {
			a.cache = cacheImmutable
		}
		if compressible(a.ctype) && len(data) > 512 {
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
			_, _ = zw.Write(data)
			_ = zw.Close()
			if b.Len() < len(data)*9/10 {
				a.gz = b.Bytes()
			}
		}
		m["/"+rel] = a
		return nil
	})
	if err != nil {
		panic("web: reading the embedded assets: " + err.Error()) // a build without dist/ cannot happen: embed fails first
	}
	return m
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.HasPrefix(ctype, "application/json") || ctype == "image/svg+xml"
}

// Handler serves the board: index.html at "/" (and "/index.html"), the
// content-hashed files under "/assets/". Mount it at "/"; other paths are
// 404 and methods other than GET and HEAD are 405. The page is revalidated
// on each load (ETag, Cache-Control: no-cache) and carries a Content
// Security Policy; assets are cacheable for a year. Clients that accept gzip
// get text compressed.
func Handler() http.Handler {
	m := assets()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if p == "/" {
			p = "/index.html"
		}
		a := m[p]
		if a == nil {
			http.NotFound(w, r)
			return
		}
		if !getonly.Allow(w, r) {
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", a.cache)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Vary", "Accept-Encoding")
		if a.page {
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("Referrer-Policy", "no-referrer")
		}
		data, etag := a.data, a.etag
		if a.gz != nil && acceptsGzip(r) {
			data, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("ETag", etag)
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(data))
	})
}

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
