package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// dataDir holds the committed runs and the charts drawn from them.
const dataDir = "../../docs/benchmarks"

// TestCommittedChartsMatchTheirData draws every committed results file's charts again and
// fails when a committed chart differs, is missing, or has no data of its own: data and
// charts cannot drift apart.
func TestCommittedChartsMatchTheirData(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(dataDir, "*-mechanisms.jsonl"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no results in %s (%v)", dataDir, err)
	}
	tmp := t.TempDir()
	written, err := generate(tmp, defaultMachine, inputs)
	if err != nil {
		t.Fatal(err)
	}
	drawn := map[string]bool{}
	for _, p := range written {
		name := filepath.Base(p)
		drawn[name] = true
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dataDir, name))
		switch {
		case err != nil:
			t.Errorf("docs/benchmarks/%s is not committed: run make charts", name)
		case !bytes.Equal(got, want):
			t.Errorf("docs/benchmarks/%s differs from what its data draws: run make charts", name)
		}
		if err := wellFormed(want); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	committed, _ := filepath.Glob(filepath.Join(dataDir, "*.svg"))
	for _, p := range committed {
		if !drawn[filepath.Base(p)] {
			t.Errorf("docs/benchmarks/%s is drawn from no results file", filepath.Base(p))
		}
	}
}

// wellFormed reports whether b parses as XML to its end.
func wellFormed(b []byte) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		top  float64
		n    int
		want []float64
	}{
		{23.4, 5, []float64{0, 5, 10, 15, 20, 25}},
		{10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{940, 5, []float64{0, 200, 400, 600, 800, 1000}},
		{1.7, 5, []float64{0, 0.5, 1, 1.5, 2}},
		{0, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
	} {
		ticks, end := niceTicks(c.top, c.n)
		if len(ticks) != len(c.want) || end != c.want[len(c.want)-1] {
			t.Errorf("niceTicks(%v, %d) = %v, end %v; want %v", c.top, c.n, ticks, end, c.want)
			continue
		}
		for i := range ticks {
			if d := ticks[i] - c.want[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("niceTicks(%v, %d) = %v; want %v", c.top, c.n, ticks, c.want)
				break
			}
		}
	}
}

func TestScales(t *testing.T) {
	y := linear{0, 50, 344, 48} // an axis from 0 to 50 ms, drawn upwards
	for v, want := range map[float64]float64{0: 344, 50: 48, 25: 196} {
		if got := y.at(v); got != want {
			t.Errorf("linear at %v = %v, want %v", v, got, want)
		}
	}
	if got := (linear{3, 3, 0, 100}).at(3); got != 50 {
		t.Errorf("an empty domain maps to %v, want the middle", got)
	}
	x := logScale{50, 800, 100, 500} // 50 to 800 events/s: four doublings
	for v, want := range map[float64]float64{50: 100, 100: 200, 200: 300, 800: 500} {
		if got := x.at(v); got < want-1e-9 || got > want+1e-9 {
			t.Errorf("log at %v = %v, want %v", v, got, want)
		}
	}
}

func TestTickLabel(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		want    string
	}{{200, 200, "200"}, {1.5, 0.5, "1.5"}, {0.4, 0.2, "0.4"}, {0, 5, "0"}} {
		if got := tickLabel(c.v, c.step); got != c.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", c.v, c.step, got, c.want)
		}
	}
}

func TestMalformedLineIsNamed(t *testing.T) {
	good := `{"target":"latency","variant":"default","codec":"msgpack","latency_p99_ms":20}`
	for _, c := range []struct{ in, want string }{
		{good + "\n\n{\"target\": \"idle\",\n", "runs.jsonl:3: not a run's JSON object"},
		{good + "\n" + `{"variant":"default","codec":"json"}` + "\n", `runs.jsonl:2: no "target"`},
		{good + "\n" + `{"target":"idle","variant":"default","codec":"json","load_1m":"high"}`, "runs.jsonl:2: not a run's"},
		{"\n\n", "runs.jsonl: no runs"},
	} {
		_, err := readRuns(strings.NewReader(c.in), "runs.jsonl")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("readRuns(%q): %v, want an error with %q", c.in, err, c.want)
		}
	}
	runs, err := readRuns(strings.NewReader(good+"\n"), "runs.jsonl")
	if err != nil || len(runs) != 1 || runs[0].P99 != 20 {
		t.Fatalf("readRuns(good) = %+v, %v", runs, err)
	}
}

func TestChartsOfRuns(t *testing.T) {
	end := 9000.0*8500 + 20e6
	runs := []run{
		{Target: "idle", Variant: "default", Codec: "msgpack", RSSPerConn: 8200, RSSBefore: 20e6, RSSEnd: &end,
			Connections: 9000, Load: 0.5, OK: true},
		{Target: "saturate", Variant: "nodirect", Codec: "json", DeliveriesPerS: 512000, Load: 1.9, OK: true},
		{Target: "latency", Variant: "default", Codec: "msgpack", ServerCPU: 2, Delivered: 1e6, Load: 1.2, OK: true},
		{Target: "rates", Variant: "default", Codec: "msgpack", Rate: 50, P50: 3, P99: 9, Load: 1, OK: true},
		{Target: "rates", Variant: "default", Codec: "msgpack", Rate: 100, P50: 5, P99: 19, Load: 1.4},
	}
	out := charts(runs, "a machine", "runs.jsonl")
	var names []string
	for n := range out {
		names = append(names, n)
	}
	want := []string{"cpu.svg", "idle-memory.svg", "latency.svg", "saturation.svg"}
	sort.Strings(names)
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("charts %v, want %v", names, want)
	}
	for name, s := range out {
		if err := wellFormed([]byte(s)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, parts := range map[string][]string{
		"idle-memory.svg": {">8.2<", ">8.5<", "after the hold", "target: at most 10 KB",
			"load average at the end of each run: 0.5."},
		"saturation.svg": {">512<", "direct writes off", ">JSON<"},
		"cpu.svg":        {">2.0<", "µs of server CPU"},
		"latency.svg":    {"MessagePack p99", "events/s", "1.0–1.4", "1 failed a check"},
	} {
		for _, p := range parts {
			if !strings.Contains(out[name], p) {
				t.Errorf("%s has no %q", name, p)
			}
		}
	}
}
