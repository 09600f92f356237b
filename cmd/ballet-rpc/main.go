// Command ballet-rpc is a command-line client of the realtime API, in
// MessagePack or JSON, with authentication, token refresh, reconnects and
// resumed subscriptions (package client).
//
// Usage:
//
//	ballet-rpc [--url URL] [--token TOKEN | --token-cmd CMD] [--json | --msgpack] COMMAND
//	ballet-rpc --version | --help
//
//	ping                          system.ping
//	subscribe STREAM [--from-seq N]  print the stream's events until interrupted
//	watch SESSION                 print a planner session's live output until interrupted
//	send SESSION TEXT             send a planner message, print the turn's output until done
//	call METHOD [PARAMS-JSON]     any request
//
// The URL defaults to ws://127.0.0.1:8080/rpc. The token comes from
// --token, from the output of --token-cmd (a shell command, run again for
// every refresh and reconnect), or from $BALLET_TOKEN.
//
// Output is one JSON object per line, so it pipes into jq: a call's result,
// then each notification's params. Errors go to stderr with their code.
//
// Exit status: 0 success (subscribe and watch: interrupted); 1 the server
// answered with an error, ended the subscription, or the planner turn
// failed; 2 usage; 3 connection or authentication failure, or the
// connection was lost during ping, send or call.
package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ballet/gateway/internal/buildinfo"
	"github.com/ballet/gateway/internal/cli"
)

// version is the build's version, set with go build -ldflags "-X main.version=v1.2.3".
var version string

func main() { cli.Main(run) }

// Exit statuses of the command's failures, beside cli.ExitOK and cli.ExitUsage.
const (
	exitRPC  = 1
	exitConn = 3
)

const usage = `usage: ballet-rpc [--url URL] [--token TOKEN | --token-cmd CMD] [--json | --msgpack] [--transport T] COMMAND

commands:
  ping                             system.ping
  subscribe STREAM [--from-seq N]  print the stream's events (project:KEY or item:KEY) until interrupted
  watch SESSION                    print a planner session's live output until interrupted
  send SESSION TEXT                send a planner message; print the turn's output until done
  call METHOD [PARAMS-JSON]        send any request, e.g. call system.ping '{}'

flags:
  --url URL        the gateway's /rpc (default ws://127.0.0.1:8080/rpc)
  --token TOKEN    OIDC access token (default $BALLET_TOKEN)
  --token-cmd CMD  shell command printing a token; run again for every refresh
  --json           use ballet.v1.json
  --msgpack        use ballet.v1.msgpack (the default)
  --transport T    auto (the default: WebSocket, or POST /rpc over HTTP where the WebSocket
                   does not open), websocket, or http (JSON only)
  --version        print the version of this build
  -h, --help       print this

Output: one JSON object per line (results, then notification params).
Exit status: 0 ok, 1 error from the server, 2 usage, 3 connection or authentication failure.
`

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd, err := parse(args, getenv)
	if err != nil {
		fmt.Fprintf(stderr, "ballet-rpc: %v\n\n%s", err, usage)
		return cli.ExitUsage
	}
	if cmd.help {
		fmt.Fprint(stdout, usage)
		return cli.ExitOK
	}
	if cmd.version {
		fmt.Fprint(stdout, buildinfo.String("ballet-rpc", version))
		return cli.ExitOK
	}
	a := &app{cmd: cmd, stdout: stdout, stderr: stderr}
	return a.run(ctx)
}
