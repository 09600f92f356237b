package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// Exit statuses of every client command; each names its own failures (1, and 3 and up).
const (
	ExitOK    = 0 // success, --help and --version
	ExitUsage = 2 // bad flags or arguments
)

// Run is a command's body: it reads args and the environment through getenv, writes to
// stdout and stderr, and returns the exit status. ctx ends on SIGINT or SIGTERM.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int

// Main runs run with the process's arguments, environment and standard streams, and exits
// with its status.
func Main(run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// TokenFromCmd runs cmd with sh -c and returns its trimmed standard output (--token-cmd).
func TokenFromCmd(ctx context.Context, cmd string) (string, error) {
	var out, errOut bytes.Buffer
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		if msg := strings.TrimSpace(errOut.String()); msg != "" {
			return "", fmt.Errorf("--token-cmd: %w: %s", err, msg)
		}
		return "", fmt.Errorf("--token-cmd: %w", err)
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" {
		return "", errors.New("--token-cmd printed no token")
	}
	return tok, nil
}

// tokenURLTimeout bounds a GET of a token URL.
const tokenURLTimeout = 30 * time.Second

// TokenFromURL GETs u and returns the "token" field of its JSON body; flag names u's source in
// errors.
func TokenFromURL(ctx context.Context, flag, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenURLTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s: %s", flag, resp.Status, strings.TrimSpace(string(body)))
	}
	var v struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &v); err != nil || v.Token == "" {
		return "", fmt.Errorf(`%s: the answer is not JSON with a "token" field`, flag)
	}
	return v.Token, nil
}
