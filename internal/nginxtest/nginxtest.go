// Package nginxtest runs a real nginx in front of gateway replicas for end-to-end tests,
// configured the way the proxies between browsers and the gateway are: ones that refuse
// WebSocket upgrades or end their connections unanswered, ones that drop the upgrade headers (nginx's default), ones that buffer
// responses, ones that end TLS and speak HTTP/2 to the browser.
//
// Entry point: Start (stopped with the test). Proxy.URL is what a client dials; Proxy.Logs goes
// into failure messages. Without nginx on PATH or in /usr/sbin the tests skip, except with
// CI=true, where they fail.
//
// Caveat: nginx retries a request on the next replica only when it could not be sent to the
// previous one (connection refused, connect timeout) or was answered 502/503 before a byte of a
// non-idempotent request went out; a POST cut off mid-response is not replayed, as in production.
package nginxtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// WebSocketMode is what the proxy does with a request that asks for a WebSocket upgrade.
type WebSocketMode int

const (
	// Strip is nginx's default: the hop-by-hop Upgrade and Connection headers are not
	// forwarded, so the replica sees a plain GET and answers it as one.
	Strip WebSocketMode = iota
	// Refuse answers any request carrying an Upgrade header 403 without forwarding it, as
	// proxies that block WebSockets do.
	Refuse
	// Pass forwards upgrades: a WebSocket-capable proxy, for comparison.
	Pass
	// Close ends the connection of any request carrying an Upgrade header without an answer
	// (nginx's 444), as proxies and firewalls that kill WebSockets do.
	Close
)

func (m WebSocketMode) String() string {
	switch m {
	case Strip:
		return "strip"
	case Refuse:
		return "refuse"
	case Pass:
		return "pass"
	case Close:
		return "close"
	}
	return fmt.Sprintf("WebSocketMode(%d)", int(m))
}

// Options configure the proxy.
type Options struct {
	// Upstreams are the replicas' host:port addresses, taken round robin; a request that cannot
	// reach one (or is answered 502 or 503) goes to the next.
	Upstreams []string
	// WebSocket is what happens to upgrade requests.
	WebSocket WebSocketMode
	// TLS makes the proxy listen with TLS and HTTP/2 on a self-signed certificate for 127.0.0.1
	// and localhost (Proxy.CertPool, Proxy.SPKIHash).
	TLS bool
	// Buffering is nginx's proxy_buffering: on, nginx holds an upstream's response until its
	// buffers fill or it ends, unless the response carries X-Accel-Buffering: no.
	Buffering bool
}

// Proxy is a running nginx.
type Proxy struct {
	dir    string
	addr   string
	tls    bool
	cert   *certificate
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	client *http.Client
}

// startTimeout bounds how long nginx may take to answer after it starts; a loaded machine with
// the race detector on is slow.
const startTimeout = 15 * time.Second

// Start starts nginx in front of o.Upstreams on a free loopback port and waits until it answers.
// It is stopped, and waited for, when the test ends.
func Start(t testing.TB, o Options) *Proxy {
	t.Helper()
	bin := binary(t)
	if len(o.Upstreams) == 0 {
		t.Fatal("nginxtest: no upstreams")
	}
	dir := t.TempDir()
	p := &Proxy{dir: dir, tls: o.TLS}
	if o.TLS {
		c, err := newCertificate(dir)
		if err != nil {
			t.Fatalf("nginxtest: certificate: %v", err)
		}
		p.cert = c
	}
	p.client = &http.Client{Transport: &http.Transport{
		TLSClientConfig:   p.TLSConfig(),
		ForceAttemptHTTP2: true, // a custom TLS config turns HTTP/2 off unless asked for
	}}
	t.Cleanup(p.client.CloseIdleConnections)

	// The port is free when asked for but may be taken before nginx binds it; another
	// port is tried then.
	var err error
	for range 3 {
		if err = p.start(t, bin, o); err == nil {
			return p
		}
		if !strings.Contains(p.Logs(), "Address already in use") {
			break
		}
	}
	t.Fatalf("nginxtest: %v\nnginx's log:\n%s", err, p.Logs())
	return nil
}

// debianPath is where Debian installs nginx, which is not on an ordinary user's PATH.
var debianPath = "/usr/sbin/nginx"

// binary is nginx's path, or the test skips (fails with CI=true).
func binary(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat(debianPath); err == nil {
		return debianPath
	}
	const msg = "nginx not found on PATH or in /usr/sbin: apt-get install nginx"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true)")
	}
	t.Skip(msg)
	return ""
}

func (p *Proxy) start(t testing.TB, bin string, o Options) error {
	t.Helper()
	port, err := freePort()
	if err != nil {
		return err
	}
	p.addr = net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	conf, err := config(bin, p.addr, p.dir, o, p.cert)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(p.dir, "nginx.conf"), conf, 0o600); err != nil {
		return err
	}
	// A log of what nginx writes outside its error log; a file, so no goroutine copies it.
	stderr, err := os.OpenFile(filepath.Join(p.dir, "stderr.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer stderr.Close()
	_ = os.Remove(filepath.Join(p.dir, "error.log")) // a failed attempt's lines are not this one's
	cmd := exec.Command(bin, "-p", p.dir, "-c", "nginx.conf", "-e", filepath.Join(p.dir, "error.log"),
		"-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	// Its own process group, so that the workers can be ended with the master; and ended if the
	// test binary dies without its cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { // ends when nginx exits, which the cleanup ensures
		waitErr = cmd.Wait()
		close(exited)
	}()
	p.cmd, p.exited = cmd, exited
	if err := p.waitReady(exited); err != nil {
		p.stop()
		if errors.Is(err, errExited) {
			return fmt.Errorf("nginx exited: %v", waitErr)
		}
		return err
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("nginxtest: %v\nnginx's log:\n%s", err, p.Logs())
		}
	})
	return nil
}

var errExited = errors.New("nginx exited")

// waitReady asks the proxy's own readiness location until it answers.
func (p *Proxy) waitReady(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	defer p.client.CloseIdleConnections()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+readyPath, nil)
		resp, err := p.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return nil
			}
			return fmt.Errorf("%s answered %s", readyPath, resp.Status)
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("nginx did not answer on %s within %s: %v", p.addr, startTimeout, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop ends nginx quickly (SIGTERM: open connections are closed, not drained), waits for it,
// and ends whatever is left of its process group.
func (p *Proxy) stop() error {
	pid := p.cmd.Process.Pid
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		err = errors.New("nginx did not stop within 10s of SIGTERM; killed")
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-p.exited
	}
	// The workers end before the master on SIGTERM; this is for a master that died first.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// URL is the proxy's base URL, http:// or https:// without a path.
func (p *Proxy) URL() string {
	if p.tls {
		return "https://" + p.addr
	}
	return "http://" + p.addr
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Client is an HTTP client for the proxy: it trusts the proxy's certificate and speaks HTTP/2
// to it when TLS is on. Its idle connections are closed when the test ends.
func (p *Proxy) Client() *http.Client { return p.client }

// Logs is nginx's error log so far, and whatever it wrote outside it, for failure messages.
func (p *Proxy) Logs() string {
	var b bytes.Buffer
	for _, f := range []string{"stderr.log", "error.log"} {
		data, err := os.ReadFile(filepath.Join(p.dir, f))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(&b, "(%s: %v)\n", f, err)
		}
		b.Write(data)
	}
	return b.String()
}

// CertPool trusts the proxy's certificate; nil without TLS.
func (p *Proxy) CertPool() *x509.CertPool {
	if p.cert == nil {
		return nil
	}
	pool := x509.NewCertPool()
	pool.AddCert(p.cert.leaf)
	return pool
}

// TLSConfig is a client configuration that trusts the proxy's certificate; nil without TLS.
func (p *Proxy) TLSConfig() *tls.Config {
	if p.cert == nil {
		return nil
	}
	return &tls.Config{RootCAs: p.CertPool(), MinVersion: tls.VersionTLS12}
}

// Certificate is the proxy's certificate; nil without TLS.
func (p *Proxy) Certificate() *x509.Certificate {
	if p.cert == nil {
		return nil
	}
	return p.cert.leaf
}

// CertFile is the path of the proxy's certificate in PEM; "" without TLS.
func (p *Proxy) CertFile() string {
	if p.cert == nil {
		return ""
	}
	return p.cert.certFile
}

// SPKIHash is the base64 SHA-256 of the certificate's public key, what Chromium's
// --ignore-certificate-errors-spki-list takes; "" without TLS.
func (p *Proxy) SPKIHash() string {
	if p.cert == nil {
		return ""
	}
	return p.cert.spkiHash()
}

// readyPath is answered by nginx itself, 204, for Start to know it is up.
const readyPath = "/.nginxtest/ready"

var confTemplate = template.Must(template.New("nginx.conf").Parse(`# Written by nginxtest for one test.
{{if .Root}}user root;
{{end}}worker_processes 1;
pid nginx.pid;

events {
  worker_connections 1024;
}

http {
  access_log access.log;
  client_body_temp_path body;
  proxy_temp_path proxy;
  fastcgi_temp_path fastcgi;
  uwsgi_temp_path uwsgi;
  scgi_temp_path scgi;

  upstream gateway {
{{range .Upstreams}}    server {{.}};
{{end}}  }
{{if eq .Mode "pass"}}
  map $http_upgrade $connection_upgrade {
    default upgrade;
    ''      close;
  }
{{end}}
  server {
    listen {{.Addr}}{{if .TLS}} ssl{{if not .HTTP2On}} http2{{end}}{{end}};
{{if .TLS}}{{if .HTTP2On}}    http2 on;
{{end}}    ssl_certificate {{.CertFile}};
    ssl_certificate_key {{.KeyFile}};
{{end}}{{if eq .Mode "refuse"}}
    # As proxies that block WebSockets do: any upgrade is refused before it is forwarded.
    if ($http_upgrade) {
      return 403;
    }
{{end}}{{if eq .Mode "close"}}
    # As proxies that kill WebSockets do: the connection of any upgrade ends without an answer.
    if ($http_upgrade) {
      return 444;
    }
{{end}}
    location = ` + readyPath + ` {
      return 204;
    }

    location / {
      proxy_pass http://gateway;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
{{if eq .Mode "pass"}}      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection $connection_upgrade;
{{end}}      proxy_buffering {{if .Buffering}}on{{else}}off{{end}};
      proxy_next_upstream error timeout http_502 http_503;
      proxy_connect_timeout 2s;
      # Longer than the gateway's 15 s heartbeats, so an idle stream is not cut.
      proxy_read_timeout 60s;
      proxy_send_timeout 60s;
    }
  }
}
`))

func config(bin, addr, dir string, o Options, c *certificate) ([]byte, error) {
	data := map[string]any{
		"Root":      os.Geteuid() == 0, // else the workers run as nobody, who cannot read dir
		"Upstreams": o.Upstreams,
		"Mode":      o.WebSocket.String(),
		"Addr":      addr,
		"TLS":       o.TLS,
		"Buffering": o.Buffering,
	}
	for _, u := range o.Upstreams {
		if _, _, err := net.SplitHostPort(u); err != nil || strings.ContainsAny(u, " ;{}") {
			return nil, fmt.Errorf("upstream %q is not host:port", u)
		}
	}
	if o.TLS {
		on, err := http2Directive(bin)
		if err != nil {
			return nil, err
		}
		data["HTTP2On"], data["CertFile"], data["KeyFile"] = on, c.certFile, c.keyFile
	}
	var b bytes.Buffer
	err := confTemplate.Execute(&b, data)
	return b.Bytes(), err
}

// http2Directive says whether this nginx turns HTTP/2 on with "http2 on;" (1.25.1 and later)
// rather than with the listen directive's http2 parameter (earlier, Debian 12's 1.22).
func http2Directive(bin string) (bool, error) {
	out, err := exec.Command(bin, "-v").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("nginx -v: %v: %s", err, out)
	}
	var major, minor, patch int
	i := bytes.Index(out, []byte("nginx/"))
	if i < 0 {
		return false, fmt.Errorf("nginx -v: no version in %q", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "nginx/%d.%d.%d", &major, &minor, &patch); err != nil {
		return false, fmt.Errorf("nginx -v: %q: %v", out, err)
	}
	v := major*1_000_000 + minor*1_000 + patch
	return v >= 1_025_001, nil
}
