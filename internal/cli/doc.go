// Package cli is what the repository's client commands (ballet-rpc, ballet-bench) share: their
// main function's signal handling and exit, the exit statuses they agree on (ExitOK,
// ExitUsage), and the ways they get an access token (a command's output, or the "token" field
// of a URL's JSON answer, e.g. the dev server's /dev/token).
package cli
