package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// rssReader reads the server's resident memory in bytes.
type rssReader interface {
	rss(ctx context.Context) (int64, error)
}

var (
	_ rssReader = procRSS(0)
	_ rssReader = metricsRSS("")
)

// procRSS reads VmRSS from /proc/PID/status.
type procRSS int

func (p procRSS) rss(context.Context) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", int(p)))
	if err != nil {
		return 0, fmt.Errorf("server RSS: %w", err)
	}
	return parseVmRSS(b)
}

// parseVmRSS finds "VmRSS:   1234 kB" in a /proc status file.
func parseVmRSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			break
		}
		return kb << 10, nil
	}
	return 0, errors.New("server RSS: no VmRSS line")
}

// metricsRSS reads process_resident_memory_bytes from a Prometheus
// text endpoint (the gateway's admin /metrics).
type metricsRSS string

func (u metricsRSS) rss(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, string(u), nil)
	if err != nil {
		return 0, fmt.Errorf("server RSS: %w", err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("server RSS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("server RSS: %s answered %s", string(u), resp.Status)
	}
	return parseMetricsRSS(io.LimitReader(resp.Body, 16<<20))
}

// parseMetricsRSS finds the process_resident_memory_bytes sample.
func parseMetricsRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "process_resident_memory_bytes")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if i := strings.IndexByte(rest, '}'); rest != "" && rest[0] == '{' && i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("server RSS: bad sample %q", line)
		}
		return int64(v), nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("server RSS: %w", err)
	}
	return 0, errors.New("server RSS: no process_resident_memory_bytes in the metrics")
}

// selfRSS is this process' resident memory, or 0 where unknown.
func selfRSS() int64 {
	n, err := procRSS(os.Getpid()).rss(context.Background())
	if err != nil {
		return 0
	}
	return n
}
