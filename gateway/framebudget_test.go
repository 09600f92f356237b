package gateway_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ballet/gateway/gateway"
	"github.com/ballet/gateway/gateway/gatewaytest"
)

// frameFlood is what a connection that sends frames as fast as the server reads them got.
type frameFlood struct {
	code   int // the server's close code; 0 when it sent none
	reason string
	sent   int // frames written before the close frame was read
	err    error
}

// floodFrames writes first, then batch over and over, until the server's close frame (or
// the deadline); it must not call t's failing methods.
func (r *rawClient) floodFrames(first, batch []byte, frames int) (res frameFlood) {
	_ = r.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := r.c.Write(first); err != nil {
		return frameFlood{err: err}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := r.c.Write(batch); err != nil {
				return
			}
			sent += frames
		}
	})
	for {
		op, p, err := readFrame(r.br)
		if err != nil {
			res.err = err
			break
		}
		if op == 0x8 && len(p) >= 2 {
			res.code, res.reason = int(binary.BigEndian.Uint16(p)), string(p[2:])
			break
		}
	}
	close(stop)
	r.c.Close()
	wg.Wait()
	res.sent = sent
	return res
}

// Frames that ask for nothing spend a budget too: a connection flooding pongs, or empty
// continuations of one open message, before auth as after, is closed 4029 once its frame
// budget and its refusals' are spent, where it was read for as long as it kept sending.
func TestFrameFloods(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, &gatewaytest.Options{Config: gateway.Config{AuthTimeout: 5 * time.Minute}})
	burst := 2 * 16 * gateway.Config{}.WithDefaults().RequestRate // the frame budget's, and its refusals'
	const per = 256
	pongs := bytes.Repeat(clientFrame(0xa, []byte("p")), per)
	empty := bytes.Repeat(part(0, false, ""), per)
	cases := []struct {
		name        string
		login       bool
		first, each []byte
	}{
		{"pongs before auth", false, nil, pongs},
		{"pongs after auth", true, nil, pongs},
		{"empty continuations before auth", false, part(1, false, "{"), empty},
		{"empty continuations after auth", true, part(1, false, "{"), empty},
	}
	results := make([]frameFlood, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		var first []byte
		if tc.login {
			first = textFrame(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, fmt.Sprint("flooder", i))))
		}
		r := rawDial(t, env, first)
		if tc.login {
			r.want(1)
		}
		wg.Go(func() { results[i] = r.floodFrames(tc.first, tc.each, per) })
	}
	wg.Wait()
	for i, tc := range cases {
		res := results[i]
		if res.code != int(gateway.StatusLimitExceeded) || res.reason != "too many frames" {
			t.Errorf("%s: close %d %q (%v) after %d frames, want 4029", tc.name, res.code, res.reason, res.err, res.sent)
		}
		t.Logf("%s: closed after %d frames written", tc.name, res.sent)
	}
	if n := limitRejections(t, env.Server, "frames"); n < float64(len(cases)*burst) {
		t.Errorf("limit_rejections_total{limit=frames} = %v, want at least %d", n, len(cases)*burst)
	}
}

// A client within the protocol is never closed by the frame budget: its auth request in
// fragments of 64 bytes, then a message of the read limit in fragments of 512 bytes with
// unsolicited pongs between them, are answered. Before auth, the first message is at most
// 64 KiB: a longer one closes 1009 at its header.
func TestFrameBudgetLetsClientsThrough(t *testing.T) {
	t.Parallel()
	env := gatewaytest.Start(t, nil)
	limit := gateway.Config{}.WithDefaults().ReadLimit
	fragments := func(msg string, size int, between []byte) []byte {
		var b []byte
		for i := 0; i < len(msg); i += size {
			op := byte(1)
			if i > 0 {
				op = 0
				b = append(b, between...)
			}
			b = append(b, part(op, i+size >= len(msg), msg[i:min(i+size, len(msg))])...)
		}
		return b
	}
	auth := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"auth","params":{"token":%q}}`, env.Token(t, "alice"))
	r := rawDial(t, env, fragments(auth, 64, nil))
	r.want(1)
	big := pingRequest(2, strings.Repeat("x", int(limit)-100))
	r.write(fragments(big, 512, clientFrame(0xa, []byte("p"))))
	r.want(2)
	r.write(textFrame(pingRequest(3, "")))
	r.want(3)

	h := hostileDial(t, env)
	h.upgrade(t, "")
	h.send(t, frameHeader(1, true, 64<<10+1))
	if code := h.closeFrame(t, 20*time.Second); code != 1009 {
		t.Fatalf("a first message over 64 KiB: close %d, want 1009", code)
	}
}
