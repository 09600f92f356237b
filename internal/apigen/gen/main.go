// Command gen writes what follows from package protocol's Go types (package apigen): the
// browser client's wire.js and asyncapi.yaml's generated places. Run from the repository's
// root, as make generate does.
package main

import (
	"fmt"
	"os"

	"github.com/ballet/gateway/internal/apigen"
)

const (
	protocolDir = "protocol"
	wireJS      = "web/src/client/wire.js"
	asyncAPI    = "docs/asyncapi.yaml"
	protocolMD  = "docs/protocol.md"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	js, err := apigen.WireJS(protocolDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(wireJS, js, 0o644); err != nil {
		return err
	}
	doc, err := os.ReadFile(asyncAPI)
	if err != nil {
		return err
	}
	md, err := os.ReadFile(protocolMD)
	if err != nil {
		return err
	}
	out, err := apigen.AsyncAPI(doc, md, protocolDir)
	if err != nil {
		return err
	}
	return os.WriteFile(asyncAPI, out, 0o644)
}
