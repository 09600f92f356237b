// Command benchcharts draws SVG charts from the JSON lines scripts/bench-mechanisms.sh writes
// (results.jsonl: one ballet-bench report a line, with target, variant, codec, rate_per_s,
// server_cpu_s and load_1m added).
//
//	go run ./scripts/benchcharts -o docs/benchmarks/ docs/benchmarks/*-mechanisms.jsonl
//
// For each input NAME.jsonl it writes, into the -o directory, the charts its runs allow:
//
//	NAME-latency.svg      p50 and p99 against the rate, per codec (the rates runs)
//	NAME-idle-memory.svg  server RSS per idle connection after connecting and after the hold,
//	                      by variant and codec (the idle runs)
//	NAME-saturation.svg   deliveries/s under saturation by variant and codec (the saturate runs)
//	NAME-cpu.svg          server CPU per delivery by variant and codec (the latency runs)
//
// A variant is the build with one speed mechanism switched off (default has every one on). Where
// a group has more than one run, the bar is the median and a tick marks each run. The output
// depends on the input alone, so the committed charts can be checked against their data.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// defaultMachine is the captions' machine unless -machine says otherwise.
const defaultMachine = "2 cores, loopback; server, PostgreSQL and load generator on one machine"

// run is one line of results.jsonl: the fields the charts read.
type run struct {
	Target         string   `json:"target"`
	Variant        string   `json:"variant"`
	Codec          string   `json:"codec"`
	Rate           float64  `json:"rate_per_s"`
	Load           float64  `json:"load_1m"`
	ServerCPU      float64  `json:"server_cpu_s"`
	Written        float64  `json:"written_events_per_s"`
	P50            float64  `json:"latency_p50_ms"`
	P99            float64  `json:"latency_p99_ms"`
	Delivered      float64  `json:"delivered_events"`
	DeliveriesPerS float64  `json:"deliveries_per_s"`
	Connections    float64  `json:"connections"`
	RSSPerConn     float64  `json:"server_rss_per_conn_bytes"`
	RSSBefore      float64  `json:"server_rss_before_bytes"`
	RSSEnd         *float64 `json:"server_rss_end_bytes"`
	OK             bool     `json:"ok"`
}

// readRuns reads the runs of r, one JSON object a line (blank lines skipped); name is the
// input's name in errors, which give the line.
func readRuns(r io.Reader, name string) ([]run, error) {
	var out []run
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for n := 1; sc.Scan(); n++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var x run
		if err := json.Unmarshal([]byte(text), &x); err != nil {
			return nil, fmt.Errorf("%s:%d: not a run's JSON object: %v", name, n, err)
		}
		for field, v := range map[string]string{"target": x.Target, "variant": x.Variant, "codec": x.Codec} {
			if v == "" {
				return nil, fmt.Errorf("%s:%d: no %q", name, n, field)
			}
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no runs", name)
	}
	return out, nil
}

// codecName is a codec as the documents write it.
func codecName(c string) string {
	switch c {
	case "msgpack":
		return "MessagePack"
	case "json":
		return "JSON"
	}
	return c
}

// mechanismOff says what a variant switches off.
var mechanismOff = map[string]string{
	"default":     "all on",
	"nopark":      "parked readers off",
	"nofd":        "descriptor serving off",
	"notimerheap": "heartbeat heap off",
	"gogc100":     "GOGC 100, not 75",
	"nodirect":    "direct writes off",
	"noparallel":  "parallel delivery off",
}

// groupsOf groups the runs of target by variant and codec, in the order they first appear.
func groupsOf(runs []run, target string) (labels [][]string, members [][]run) {
	index := map[string]int{}
	for _, r := range runs {
		if r.Target != target {
			continue
		}
		key := r.Variant + "\x00" + r.Codec
		i, ok := index[key]
		if !ok {
			i = len(labels)
			index[key] = i
			off := mechanismOff[r.Variant]
			if off == "" {
				off = r.Variant
			}
			labels = append(labels, []string{r.Variant, codecName(r.Codec), off})
			members = append(members, nil)
		}
		members[i] = append(members[i], r)
	}
	return labels, members
}

// caption is the chart's last lines: the machine, the load over its runs, the data's file.
func caption(machine, data string, runs []run) []string {
	lo, hi := runs[0].Load, runs[0].Load
	failed := 0
	for _, r := range runs {
		lo, hi = min(lo, r.Load), max(hi, r.Load)
		if !r.OK {
			failed++
		}
	}
	load := num(lo, 1)
	if hi != lo {
		load += "–" + num(hi, 1)
	}
	s := fmt.Sprintf("%s. 1-minute load average at the end of each run: %s. %d runs, from %s.",
		machine, load, len(runs), data)
	if failed > 0 {
		s += fmt.Sprintf(" %d failed a check.", failed)
	}
	return []string{s}
}

// only keeps the runs of target.
func only(runs []run, target string) []run {
	var out []run
	for _, r := range runs {
		if r.Target == target {
			out = append(out, r)
		}
	}
	return out
}

// perDelivery is a run's server CPU per delivered event, in µs.
func perDelivery(r run) float64 {
	if r.Delivered == 0 {
		return 0
	}
	return r.ServerCPU / r.Delivered * 1e6
}

// charts draws every chart the runs allow, by file name (without the stem).
func charts(runs []run, machine, data string) map[string]string {
	out := map[string]string{}
	if rs := only(runs, "rates"); len(rs) > 0 {
		out["latency.svg"] = latencyChart(rs, machine, data)
	}
	if rs := only(runs, "idle"); len(rs) > 0 {
		labels, members := groupsOf(rs, "idle")
		c := &barChart{
			title:  "Server RSS per idle connection (9,000 connections, one subscription each)",
			yLabel: "KB per connection (1 KB = 1,000 bytes)",
			series: []string{"after connecting", "after the hold"},
			groups: labels, target: 10, targetLabel: "target: at most 10 KB", decimals: 1,
			caption: caption(machine, data, rs),
		}
		for _, m := range members {
			var conn, held []float64
			for _, r := range m {
				conn = append(conn, r.RSSPerConn/1000)
				if r.RSSEnd != nil && r.Connections > 0 {
					held = append(held, (*r.RSSEnd-r.RSSBefore)/r.Connections/1000)
				}
			}
			c.values = append(c.values, [][]float64{conn, held})
		}
		out["idle-memory.svg"] = c.svg()
	}
	if rs := only(runs, "saturate"); len(rs) > 0 {
		perSecond := func(r run) float64 { return r.DeliveriesPerS / 1000 }
		out["saturation.svg"] = oneMeasure(rs, "saturate", perSecond, &barChart{
			title:  "Deliveries per second under saturation (1000 subscribers, 10 s)",
			yLabel: "thousand deliveries/s", series: []string{"deliveries/s"},
			target: 195, targetLabel: "target: at least 195k/s", caption: caption(machine, data, rs),
		})
	}
	if rs := only(runs, "latency"); len(rs) > 0 {
		out["cpu.svg"] = oneMeasure(rs, "latency", perDelivery, &barChart{
			title:  "Server CPU per delivery (1000 subscribers x 100 events/s, 10 s)",
			yLabel: "µs of server CPU per delivery (connecting included)", series: []string{"CPU per delivery"},
			decimals: 1, caption: caption(machine, data, rs),
		})
	}
	return out
}

// oneMeasure draws c with a bar per variant and codec: value of each run of target.
func oneMeasure(runs []run, target string, value func(run) float64, c *barChart) string {
	labels, members := groupsOf(runs, target)
	c.groups = labels
	for _, m := range members {
		var v []float64
		for _, r := range m {
			v = append(v, value(r))
		}
		c.values = append(c.values, [][]float64{v})
	}
	return c.svg()
}

// latencyChart is p50 and p99 against the rate, a line per codec and quantile through the
// medians of each rate's runs.
func latencyChart(runs []run, machine, data string) string {
	c := &lineChart{
		title:  "Commit-to-client latency against the rate (1000 subscribers, 10 s a run)",
		xLabel: "events/s asked of the writer, one event a commit (each to 1000 subscribers; log scale)",
		yLabel: "latency (ms)",
		target: 35, targetLabel: "target: p99 at most 35 ms at 100 events/s",
		caption: caption(machine, data, runs),
	}
	var codecs []string
	rates := map[float64]bool{}
	for _, r := range runs {
		if !contains(codecs, r.Codec) {
			codecs = append(codecs, r.Codec)
		}
		rates[r.Rate] = true
	}
	for x := range rates {
		c.xTicks = append(c.xTicks, x)
	}
	sort.Float64s(c.xTicks)
	c.xNotes = map[float64]string{}
	for _, x := range c.xTicks {
		var written []float64
		for _, r := range runs {
			if r.Rate == x {
				written = append(written, r.Written)
			}
		}
		// A writer that fell short of the rate asked: the point is at the rate asked, but the
		// label says what was written.
		if w := median(written); w > 0 && w < 0.95*x {
			c.xNotes[x] = "wrote " + num(w, 0) + "/s"
		}
	}
	for ci, codec := range codecs {
		for qi, q := range []string{"p99", "p50"} {
			s := lineSeries{name: codecName(codec) + " " + q, color: palette[ci%len(palette)], dashed: qi == 1}
			for _, x := range c.xTicks {
				var ys []float64
				for _, r := range runs {
					if r.Codec == codec && r.Rate == x {
						ys = append(ys, map[string]float64{"p99": r.P99, "p50": r.P50}[q])
					}
				}
				if len(ys) > 0 {
					s.points = append(s.points, point{x, median(ys), ys})
				}
			}
			c.series = append(c.series, s)
		}
	}
	return c.svg()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// median of vs (not empty); vs is left as it was.
func median(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// generate reads each input and writes its charts into dir; it returns the files written.
func generate(dir, machine string, inputs []string) ([]string, error) {
	var written []string
	for _, in := range inputs {
		f, err := os.Open(in)
		if err != nil {
			return nil, err
		}
		runs, err := readRuns(f, in)
		f.Close()
		if err != nil {
			return nil, err
		}
		base := filepath.Base(in)
		stem := strings.TrimSuffix(base, filepath.Ext(base))
		out := charts(runs, machine, base)
		names := make([]string, 0, len(out))
		for name := range out {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			p := filepath.Join(dir, stem+"-"+name)
			if err := os.WriteFile(p, []byte(out[name]), 0o644); err != nil {
				return nil, err
			}
			written = append(written, p)
		}
	}
	return written, nil
}

func main() {
	dir := flag.String("o", ".", "directory the charts are written to")
	machine := flag.String("machine", defaultMachine, "the machine, for the captions")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: benchcharts [-o DIR] [-machine TEXT] RESULTS.jsonl...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	written, err := generate(*dir, *machine, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcharts:", err)
		os.Exit(1)
	}
	for _, p := range written {
		fmt.Println(p)
	}
}
