package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
)

// field is one figure of a report.
type field struct {
	name  string
	value any
	unit  string
}

// report is the outcome of a run: ordered figures and failed checks.
type report struct {
	fields   []field
	failures []string
}

func (r *report) add(name string, v any, unit string) {
	r.fields = append(r.fields, field{name, v, unit})
}

func (r *report) fail(format string, a ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, a...))
}

// ok reports whether every check passed.
func (r *report) ok() bool { return len(r.failures) == 0 }

// get returns a figure's value (tests read reports through it).
func (r *report) get(name string) (any, bool) {
	for _, f := range r.fields {
		if f.name == name {
			return f.value, true
		}
	}
	return nil, false
}

// writeJSON writes the report as one JSON object on one line, figures in
// order, then "ok" and "failures".
func (r *report) writeJSON(w io.Writer) error {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, f := range r.fields {
		k, _ := json.Marshal(f.name)
		v := f.value
		if x, ok := v.(float64); ok {
			v = round(x)
		}
		val, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		b.WriteByte(',')
	}
	fmt.Fprintf(&b, `"ok":%v,"failures":`, r.ok())
	fails := r.failures
	if fails == nil {
		fails = []string{}
	}
	fj, _ := json.Marshal(fails)
	b.Write(fj)
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// round keeps four significant digits past the point for readability.
func round(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	if math.Abs(x) >= 1000 {
		return math.Round(x*10) / 10
	}
	return math.Round(x*10000) / 10000
}

// writeTable writes the report as an aligned table for people.
func (r *report) writeTable(w io.Writer) error {
	var b bytes.Buffer
	width := 0
	for _, f := range r.fields {
		width = max(width, len(f.name))
	}
	for _, f := range r.fields {
		var v string
		switch x := f.value.(type) {
		case float64:
			v = formatFloat(x)
		default:
			v = fmt.Sprint(x)
		}
		if f.unit != "" && f.unit != "s" && f.unit != "ms" {
			v += " " + f.unit
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, f.name, v)
	}
	if r.ok() {
		b.WriteString("result: PASS\n")
	} else {
		b.WriteString("result: FAIL\n")
		for _, f := range r.failures {
			b.WriteString("  - " + strings.TrimSpace(f) + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}
