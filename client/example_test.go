package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/ballet/gateway/auth"
	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
)

// Subscribe to a project's stream and read its events. The example runs
// against an in-process gateway with an in-memory log.
func Example() {
	gw := startExampleGateway()
	defer gw.stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, gw.url, &client.Options{
		Token: gw.tokens, // called again before each auth.refresh and reconnect
	})
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()

	pong, err := c.Ping(ctx)
	fmt.Println("ping:", pong.Subject, err)

	sub, err := c.Subscribe(ctx, "project:WEB", &client.SubscribeOptions{
		// After a reconnect the client resumes from the last delivered seq;
		// when the server cannot replay that far, reload the snapshot.
		OnResync: func(seq int64) { fmt.Println("reload the snapshot at", seq) },
	})
	if err != nil {
		fmt.Println("subscribe:", err)
		return
	}
	gw.log.Append(ctx, streams.NewEvent{
		ProjectKey: "WEB", Type: "item.state_changed", EntityType: "item", EntityID: "0199",
		EntityKey: "WEB-42", ActorKind: "human", ActorSubject: "alice",
		Payload: []byte(`{"from":"backlog","to":"ready"}`),
	})
	ev := <-sub.Events()
	fmt.Println(ev.Type, ev.EntityKey, string(ev.Payload))
	// Output:
	// ping: alice <nil>
	// item.state_changed WEB-42 {"from":"backlog","to":"ready"}
}

// Watch a planner session first, then send a message: the turn's output
// arrives on the watch until "done".
func ExampleClient_PlannerSend() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "ws://127.0.0.1:8080/rpc", &client.Options{
		Token: client.StaticToken("<access token>"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	w, err := c.PlannerWatch(ctx, "0199-session", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Unsubscribe(ctx)
	if _, err := c.PlannerSend(ctx, "0199-session", "Split WEB-42 into smaller items", nil); err != nil {
		fmt.Println(err)
		return
	}
	for out := range w.Output() {
		switch out.Type {
		case client.OutputText:
			fmt.Print(out.Text)
		case client.OutputDone:
			fmt.Println("\nturn ended:", out.Text)
			return
		}
	}
}

// Observe the connection and tell a refused token from a network problem.
func ExampleOptions_onStateChange() {
	ctx := context.Background()
	_, _ = client.Dial(ctx, "ws://127.0.0.1:8080/rpc", &client.Options{
		Token: client.StaticToken("<access token>"),
		OnStateChange: func(s client.State, err error) {
			fmt.Println("connection:", s, err)
		},
	})
}

// Tell a limit of the server from other errors. Requests refused for the
// rate were already sent again Options.RateLimitRetries times.
func ExampleLimitError() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "ws://127.0.0.1:8080/rpc", &client.Options{Token: client.StaticToken("<access token>")})
	if err != nil {
		fmt.Println("dial:", err)
		return
	}
	defer c.Close()
	fmt.Println("subscriptions allowed:", c.Limits().Subscriptions)
	_, err = c.Subscribe(ctx, "item:WEB-42", nil)
	var le *client.LimitError
	switch {
	case errors.As(err, &le) && le.Limit == client.LimitSubscriptions:
		fmt.Println("unsubscribe something first; at most", le.Max)
	case errors.As(err, &le) && le.Limit == client.LimitRequests:
		fmt.Println("too many requests; try again in", le.RetryAfter)
	case err != nil:
		fmt.Println("subscribe:", err)
	}
}

type exampleGateway struct {
	url    string
	tokens client.TokenSource
	log    *memlog.Log
	stop   func()
}

// startExampleGateway runs a gateway with a development issuer, an
// in-memory log and a project WEB that alice administers.
func startExampleGateway() *exampleGateway {
	mux := http.NewServeMux()
	issuerSrv := httptest.NewServer(mux)
	iss, err := auth.NewIssuer(issuerSrv.URL+"/oidc", nil)
	if err != nil {
		panic(err)
	}
	mux.Handle("/oidc/", iss)
	ctx := context.Background()
	verifier, err := auth.NewVerifier(ctx, iss.URL(), "example", nil)
	if err != nil {
		panic(err)
	}
	log := memlog.New()
	if err := log.CreateProject(ctx, "WEB", "Web", "alice"); err != nil {
		panic(err)
	}
	if err := log.Grant(ctx, "WEB", "alice", streams.RoleAdmin, "system", "example"); err != nil {
		panic(err)
	}
	hub := streams.NewHub(nil)
	tailer := streams.NewTailer(log, hub.Dispatch, nil)
	if err := tailer.Start(ctx); err != nil {
		panic(err)
	}
	srv, err := gateway.NewServer(&gateway.Options{Verifier: verifier, Log: log, Hub: hub, Roles: log})
	if err != nil {
		panic(err)
	}
	gwSrv := httptest.NewServer(srv.Handler())
	return &exampleGateway{
		url: "ws" + strings.TrimPrefix(gwSrv.URL, "http") + "/rpc",
		tokens: func(context.Context) (string, error) {
			return iss.Mint("alice", auth.TokenOptions{Audience: []string{"example"}})
		},
		log: log,
		stop: func() {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			gwSrv.Close()
			tailer.Close()
			log.Close()
			issuerSrv.Close()
		},
	}
}
