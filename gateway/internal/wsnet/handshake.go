package wsnet

import (
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
)

// The opening handshake (RFC 6455 §4.2.1): what a request must be to be upgraded, and the
// status that answers one that is not.

// checkHandshake returns the request's Sec-WebSocket-Key, or the status that refuses the
// request and why, having set the headers that answer tells the client (RFC 6455 §4.4).
func checkHandshake(h http.Header, r *http.Request) (string, int, error) {
	if !r.ProtoAtLeast(1, 1) {
		return "", http.StatusUpgradeRequired, fmt.Errorf("a WebSocket handshake is HTTP/1.1 or later, not %s", r.Proto)
	}
	if !hasToken(r.Header, "Connection", "upgrade") {
		h.Add("Connection", "Upgrade") // after the caller's close, if it set one
		h.Set("Upgrade", "websocket")
		return "", http.StatusUpgradeRequired, fmt.Errorf("a WebSocket handshake has Upgrade in its Connection header, not %q", r.Header.Get("Connection"))
	}
	if !hasToken(r.Header, "Upgrade", "websocket") {
		h.Add("Connection", "Upgrade") // after the caller's close, if it set one
		h.Set("Upgrade", "websocket")
		return "", http.StatusUpgradeRequired, fmt.Errorf("a WebSocket handshake has websocket in its Upgrade header, not %q", r.Header.Get("Upgrade"))
	}
	if r.Method != http.MethodGet {
		return "", http.StatusMethodNotAllowed, fmt.Errorf("a WebSocket handshake is a GET, not %s", r.Method)
	}
	if vs := r.Header.Values("Sec-WebSocket-Version"); len(vs) != 1 || vs[0] != "13" {
		// One header, naming 13: a second one leaves the version the client speaks unsaid.
		h.Set("Sec-WebSocket-Version", "13")
		return "", http.StatusBadRequest, fmt.Errorf("WebSocket version 13 only, in one header, not %q", vs)
	}
	if r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		// What follows the header is the WebSocket's, not a body's: a body would be read as
		// frames, and a server waiting for it would hold the socket.
		return "", http.StatusBadRequest, errors.New("a WebSocket handshake has no body")
	}
	keys := r.Header.Values("Sec-WebSocket-Key")
	if len(keys) != 1 {
		return "", http.StatusBadRequest, fmt.Errorf("a WebSocket handshake has one Sec-WebSocket-Key, not %d", len(keys))
	}
	key := strings.TrimSpace(keys[0])
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return "", http.StatusBadRequest, fmt.Errorf("Sec-WebSocket-Key %q is not 16 bytes in base64", key)
	}
	return key, 0, nil
}

// checkOrigin lets in a request without Origin, one from its own host, and one whose
// origin's host (or scheme://host, for a pattern with a scheme) matches a pattern; it
// refuses the others with 403. Patterns and hosts are compared in lower case.
func checkOrigin(r *http.Request, patterns []string) (int, error) {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return 0, nil
	}
	u, err := url.Parse(origin)
	if err != nil {
		return http.StatusForbidden, fmt.Errorf("the Origin %q is not a URL", origin)
	}
	if strings.EqualFold(r.Host, u.Host) {
		return 0, nil
	}
	for _, p := range patterns {
		target := u.Host
		if strings.Contains(p, "://") {
			target = u.Scheme + "://" + u.Host
		}
		if ok, err := path.Match(strings.ToLower(p), strings.ToLower(target)); err == nil && ok {
			return 0, nil
		}
	}
	if u.Host == "" {
		return http.StatusForbidden, fmt.Errorf("the Origin %q has no host", origin)
	}
	return http.StatusForbidden, fmt.Errorf("the Origin %q may not open a connection to %q", u.Host, r.Host)
}

// chooseSubprotocol is the first of ours that the client offers, as we spell it (a
// connection keeps no part of the request) and as the client did, or "".
func chooseSubprotocol(h http.Header, ours []string) (string, string) {
	offered := h.Values("Sec-WebSocket-Protocol")
	for _, sp := range ours {
		for _, v := range offered {
			for t := range strings.SplitSeq(v, ",") {
				if t = strings.TrimSpace(t); strings.EqualFold(t, sp) {
					return sp, t
				}
			}
		}
	}
	return "", ""
}

// hasToken reports whether the comma-separated header key has token, in any case.
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// acceptKey is the Sec-WebSocket-Accept that answers key (RFC 6455 §4.2.2).
func acceptKey(key string) string {
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// CheckOrigin is the handshake's Origin rule, for the other requests of /rpc (POST /rpc): nil
// for a request without Origin, from its own host, or from an origin a pattern matches, else
// why it is refused (403).
func CheckOrigin(r *http.Request, patterns []string) error {
	_, err := checkOrigin(r, patterns)
	return err
}
