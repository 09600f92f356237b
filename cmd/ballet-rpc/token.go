package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// runTokenCmd runs cmd with sh -c and returns its trimmed standard output.
func runTokenCmd(ctx context.Context, cmd string) (string, error) {
	var out, errOut bytes.Buffer
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		msg := strings.TrimSpace(errOut.String())
		if msg != "" {
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
