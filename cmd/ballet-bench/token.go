package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"time"
)

// fetchToken returns the access token every connection of the run uses:
// the --token value, the output of --token-cmd, or the "token" field of
// the JSON that --token-url answers (e.g. the dev server's /dev/token).
func fetchToken(ctx context.Context, cfg *config) (string, error) {
	switch {
	case cfg.token != "":
		return cfg.token, nil
	case cfg.tokenCmd != "":
		return runTokenCmd(ctx, cfg.tokenCmd)
	case cfg.tokenURL != "":
		return getTokenURL(ctx, "--token-url", cfg.tokenURL)
	}
	return "", errors.New("no token")
}

// runTokenCmd runs cmd with sh -c and returns its trimmed standard output.
func runTokenCmd(ctx context.Context, cmd string) (string, error) {
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

// getTokenURL GETs u and returns the "token" field of its JSON body; flag names u's source.
func getTokenURL(ctx context.Context, flag, u string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
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
