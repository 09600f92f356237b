package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/ballet/gateway/client"
	"github.com/ballet/gateway/codec"
	"github.com/ballet/gateway/internal/cli"
)

// command is a parsed command line.
type command struct {
	url      string
	token    string
	tokenCmd string
	codec    codec.Codec
	// transport is --transport's: client.TransportAuto (WebSocket, HTTP where it does not
	// open), TransportWebSocket or TransportHTTP.
	transport client.Transport
	name      string // ping, subscribe, watch, send, call
	args      []string
	fromSeq   *int64
	params    codec.RawJSON // call's params; nil for none
	help      bool
	version   bool // --version: print the build's version
}

func parse(args []string, getenv func(string) string) (*command, error) {
	c := &command{}
	fs := flag.NewFlagSet("ballet-rpc", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.url, "url", "ws://127.0.0.1:8080/rpc", "")
	fs.StringVar(&c.token, "token", "", "")
	fs.StringVar(&c.tokenCmd, "token-cmd", "", "")
	useJSON := fs.Bool("json", false, "")
	useMsgpack := fs.Bool("msgpack", false, "")
	fromSeq := fs.String("from-seq", "", "")
	transport := fs.String("transport", "auto", "")
	fs.BoolVar(&c.version, "version", false, "")
	// Flags may come before or after the command and its arguments; "--"
	// ends them.
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help = true
				return c, nil
			}
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if c.version {
		return c, nil
	}
	if *useJSON && *useMsgpack {
		return nil, errors.New("--json and --msgpack exclude each other")
	}
	c.codec = codec.MsgPack
	if *useJSON {
		c.codec = codec.JSON
	}
	switch *transport {
	case "auto":
		c.transport = client.TransportAuto
	case "websocket":
		c.transport = client.TransportWebSocket
	case "http":
		if *useMsgpack {
			return nil, errors.New("--transport http carries JSON only: drop --msgpack")
		}
		c.transport, c.codec = client.TransportHTTP, codec.JSON
	default:
		return nil, fmt.Errorf("--transport %q: want auto, websocket or http", *transport)
	}
	if len(pos) == 0 {
		return nil, errors.New("no command given")
	}
	c.name, c.args = pos[0], pos[1:]
	want := map[string][2]int{ // command: min, max arguments
		"ping": {0, 0}, "subscribe": {1, 1}, "watch": {1, 1}, "send": {2, 2}, "call": {1, 2},
	}
	n, ok := want[c.name]
	switch {
	case c.name == "help":
		c.help = true
		return c, nil
	case !ok:
		return nil, fmt.Errorf("unknown command %q", c.name)
	case len(c.args) < n[0] || len(c.args) > n[1]:
		return nil, fmt.Errorf("%s: wrong number of arguments", c.name)
	}
	if *fromSeq != "" {
		if c.name != "subscribe" {
			return nil, errors.New("--from-seq is for subscribe")
		}
		v, err := strconv.ParseInt(*fromSeq, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("--from-seq %q: want a non-negative integer", *fromSeq)
		}
		c.fromSeq = &v
	}
	if c.name == "call" && len(c.args) == 2 {
		if !json.Valid([]byte(c.args[1])) {
			return nil, fmt.Errorf("call: params %q are not JSON", c.args[1])
		}
		if !utf8.ValidString(c.args[1]) {
			return nil, fmt.Errorf("call: params %q are not UTF-8 text", c.args[1])
		}
		c.params = codec.RawJSON(c.args[1])
	}
	if c.token != "" && c.tokenCmd != "" {
		return nil, errors.New("--token and --token-cmd exclude each other")
	}
	if c.token == "" && c.tokenCmd == "" {
		c.token = getenv("BALLET_TOKEN")
		if c.token == "" {
			return nil, errors.New("no token: give --token, --token-cmd or set BALLET_TOKEN")
		}
	}
	return c, nil
}

// tokenSource is where the token comes from: the flag or environment, or
// the output of a shell command run each time.
func (c *command) tokenSource() func(context.Context) (string, error) {
	if c.tokenCmd == "" {
		tok := c.token
		return func(context.Context) (string, error) { return tok, nil }
	}
	return func(ctx context.Context) (string, error) { return cli.TokenFromCmd(ctx, c.tokenCmd) }
}
