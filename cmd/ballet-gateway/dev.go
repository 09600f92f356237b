package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/internal/server"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/web"
)

// The development setup: one demo project, a human user who administers
// it, and a viewer.
const (
	devAudience = "ballet-dev"
	devUser     = "dev-user"
	devViewer   = "dev-viewer"
	devProject  = "DEMO"
	devTokenTTL = 12 * time.Hour
	devIssuer   = "/dev/oidc"
)

func dev(ctx context.Context, args []string, getenv func(string) string) error {
	if len(args) > 0 {
		return badUsage("dev", "dev takes no arguments")
	}
	cfg, err := devConfig(getenv)
	if err != nil {
		return err
	}
	cfg.tracker.AdminSubjects = append([]string{devUser}, cfg.tracker.AdminSubjects...)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.logLevel}))
	warnIgnored(logger, cfg, getenv, forDev, "dev")
	if !loopback(cfg.addr) {
		if !cfg.devAllowRemote {
			return &configError{Var: "BALLET_ADDR", Value: cfg.addr, Msg: "dev listens on loopback only " +
				"(127.0.0.0/8, ::1 or localhost): anyone who reaches it can mint tokens; " +
				"BALLET_DEV_ALLOW_REMOTE=true allows it"}
		}
		logger.Warn("BALLET_DEV_ALLOW_REMOTE=true: dev's token mint (GET /dev/token) is open to anyone who reaches " +
			cfg.addr)
	}

	tr, err := startTracing(cfg, logger)
	if err != nil {
		return err
	}
	defer stopTracing(tr, logger) // last: after the server's last spans
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return &configError{Var: "BALLET_ADDR", Value: cfg.addr, Msg: "cannot listen: " + err.Error()}
	}
	host := ln.Addr().(*net.TCPAddr)
	hostport := net.JoinHostPort(host.IP.String(), fmt.Sprint(host.Port))
	if host.IP.IsUnspecified() {
		hostport = net.JoinHostPort("127.0.0.1", fmt.Sprint(host.Port))
	}
	issuerURL := "http://" + hostport + devIssuer
	issuer, err := auth.NewIssuer(issuerURL, nil)
	if err != nil {
		ln.Close()
		return err
	}
	token, err := issuer.Mint(devUser, auth.TokenOptions{Audience: []string{devAudience}, TTL: devTokenTTL})
	if err != nil {
		ln.Close()
		return err
	}
	o, err := cfg.serverOptions(logger)
	if err != nil {
		ln.Close()
		return err
	}
	o.ClientListener, o.Board, o.TracerProvider = ln, web.Handler(), tr.Provider()
	o.Issuer = server.Issuer{URL: issuerURL, Audience: devAudience, OnClientPort: true}
	o.Routes = func(mux *http.ServeMux) {
		mux.Handle(devIssuer+"/", issuer)
		mux.HandleFunc("GET /dev/token", devTokenHandler(issuer))
	}
	// Once the issuer, served on the client port, is discovered.
	o.Started = func() { printDevBanner(os.Stdout, hostport, issuerURL, token) }
	s, err := server.New(ctx, o)
	if err != nil {
		ln.Close()
		return err
	}
	if err := seedDev(ctx, s.Memory, s.Tracker); err != nil {
		s.Close()
		ln.Close()
		return err
	}
	return runServer(ctx, s)
}

// devConfig is dev's configuration: serve's, on loopback, with the scripted planner.
func devConfig(getenv func(string) string) (*config, error) {
	cfg, err := loadConfig(getenv, devAddr)
	if cfg.provider.name == "" {
		cfg.provider.name = "scripted"
	}
	return cfg, err
}

// loopback says whether addr's host is a loopback address or localhost; an empty host is
// every interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// seedDev creates the demo project, its members and a few items.
func seedDev(ctx context.Context, store *memlog.Log, svc *tracker.Service) error {
	if err := store.CreateProject(ctx, devProject, "Demo project", devUser); err != nil {
		return err
	}
	if err := store.Grant(ctx, devProject, devUser, "admin", streams.ActorSystem, "dev"); err != nil {
		return err
	}
	if err := store.Grant(ctx, devProject, devViewer, "viewer", streams.ActorSystem, "dev"); err != nil {
		return err
	}
	me := tracker.Actor{Kind: tracker.ActorHuman, Subject: devUser}
	var keys []string
	for _, in := range []tracker.ItemInput{
		{Title: "Sketch the board layout", State: tracker.StateDone},
		{Title: "Live updates over /rpc", State: tracker.StateInProgress},
		{Title: "Planner chat panel", State: tracker.StateReady},
		{Title: "Keyboard shortcuts", Description: "j/k to move, enter to open"},
	} {
		it, err := svc.CreateItem(ctx, me, devProject, in)
		if err != nil {
			return err
		}
		keys = append(keys, it.Key)
	}
	_, _, err := svc.AddDependency(ctx, me, keys[2], keys[1])
	return err
}

func printDevBanner(w io.Writer, hostport, issuerURL, token string) {
	fmt.Fprintf(w, `
=====================================================================
  ballet-gateway DEVELOPMENT MODE — NOT FOR PRODUCTION
  In-memory store (lost on exit), built-in OIDC issuer, demo data.
=====================================================================
  board:    http://%[1]s/   (the live project board)
  /rpc:     ws://%[1]s/rpc
  issuer:   %[2]s   (audience %[3]s)
  project:  %[4]s   (you are %[5]s, its admin)
  REST:     http://%[1]s/api/v1/projects/%[4]s/items   (Authorization: Bearer <token>)

  A token for %[5]s (valid %[6]s; more at http://%[1]s/dev/token?subject=NAME):

%[7]s

  Try it with wscat (npm install -g wscat):

    wscat -s ballet.v1.json -c ws://%[1]s/rpc

  then send, one line each:

    {"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":"%[7]s"}}
    {"jsonrpc":"2.0","id":2,"method":"system.ping","params":{}}
    {"jsonrpc":"2.0","id":3,"method":"stream.subscribe","params":{"subscription":"s1","stream":"project:%[4]s"}}
=====================================================================
`, hostport, issuerURL, devAudience, devProject, devUser, devTokenTTL, token)
}

// devTokenHandler mints development tokens: GET /dev/token?subject=NAME
// (default dev-user), &client_id=ID for a service token.
func devTokenHandler(issuer *auth.Issuer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		subject := r.URL.Query().Get("subject")
		if subject == "" {
			subject = devUser
		}
		ttl := devTokenTTL
		if v := r.URL.Query().Get("ttl"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > 7*24*time.Hour {
				http.Error(w, "ttl: want a duration up to 168h", http.StatusBadRequest)
				return
			}
			ttl = d
		}
		tok, err := issuer.Mint(subject, auth.TokenOptions{
			Audience: []string{devAudience}, TTL: ttl, ClientID: r.URL.Query().Get("client_id"),
		})
		if err != nil {
			http.Error(w, "cannot mint a token", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token": tok, "subject": subject, "expires_at": time.Now().Add(ttl).Unix(),
		})
	}
}
