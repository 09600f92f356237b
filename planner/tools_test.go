package planner_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/gateway/tracker"
)

// TestToolSchemasCarryTrackerLimits: the schemas of create_item and update_item bound titles
// and descriptions by the limits of the Service's tracker, and the model is given those.
func TestToolSchemasCarryTrackerLimits(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         *tracker.Options
		title, descr int
	}{
		{"defaults", nil, tracker.DefaultMaxTitleChars, tracker.DefaultMaxDescriptionBytes},
		{"configured", &tracker.Options{MaxTitleChars: 77, MaxDescriptionBytes: 999}, 77, 999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackendWith(t, "memory", tc.opts)
			svc, rec := b.service(t, nil, nil)
			checked := 0
			for _, tool := range svc.Tools() {
				var schema struct {
					Properties map[string]struct {
						MaxLength   *int   `json:"maxLength"`
						Description string `json:"description"`
					} `json:"properties"`
				}
				if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
					t.Fatalf("%s: schema %s: %v", tool.Name, tool.InputSchema, err)
				}
				if tool.Name != "create_item" && tool.Name != "update_item" {
					continue
				}
				title, descr := schema.Properties["title"], schema.Properties["description"]
				if title.MaxLength == nil || *title.MaxLength != tc.title || descr.MaxLength == nil || *descr.MaxLength != tc.descr ||
					!strings.Contains(descr.Description, strconv.Itoa(tc.descr)+" bytes") {
					t.Errorf("%s: schema %s, want titles of %d characters and descriptions of %d bytes", tool.Name, tool.InputSchema, tc.title, tc.descr)
				}
				checked++
			}
			if checked != 2 {
				t.Fatalf("checked %d tools, want create_item and update_item", checked)
			}
			if _, err := svc.Send(ctxT(t), alice, b.newSession(t, svc), "hello"); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the model call", func() bool { return len(rec.requests()) > 0 })
			if !reflect.DeepEqual(rec.requests()[0].Tools, svc.Tools()) {
				t.Fatal("the model was given other tools than Tools()")
			}
		})
	}
}
