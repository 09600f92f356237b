package main

import (
	"context"
	"errors"

	"github.com/ballet/gateway/internal/cli"
)

// fetchToken returns the access token every connection of the run uses:
// the --token value, the output of --token-cmd, or the "token" field of
// the JSON that --token-url answers (e.g. the dev server's /dev/token).
func fetchToken(ctx context.Context, cfg *config) (string, error) {
	switch {
	case cfg.token != "":
		return cfg.token, nil
	case cfg.tokenCmd != "":
		return cli.TokenFromCmd(ctx, cfg.tokenCmd)
	case cfg.tokenURL != "":
		return cli.TokenFromURL(ctx, "--token-url", cfg.tokenURL)
	}
	return "", errors.New("no token")
}
