package planner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/provider"
)

func TestCompaction(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b *backend) {
		// Each human message is about 2000 tokens; tools and instructions about 900 more.
		svc, rec := b.service(t, &planner.Options{ContextBudget: 4000}, nil)
		id := b.newSession(t, svc)
		w := watch(t, svc, alice, id)
		long := func(tag string) string { return "hello " + tag + " " + strings.Repeat("x", 8000) }

		send := func(text string) []string {
			t.Helper()
			if _, err := svc.Send(ctxT(t), alice, id, text); err != nil {
				t.Fatal(err)
			}
			return shape(w.until(t, planner.OutputDone))
		}
		if got := send(long("one")); slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "compacted") }) {
			t.Fatalf("compacted within the budget: %v", got)
		}
		before := len(rec.requests())
		got := send(long("two"))
		if !slices.Equal(got[:2], []string{"message 3", "compacted 2"}) || got[len(got)-1] != "done end_turn" {
			t.Fatalf("output of the second turn: %v", got)
		}
		sum, err := svc.Summary(ctxT(t), alice, id)
		if err != nil || sum == nil || sum.UpTo != 2 || sum.Text != "SUMMARY of the earlier talk" {
			t.Fatalf("summary %+v, %v", sum, err)
		}
		// The transcript itself is unchanged.
		msgs := transcript(t, svc, id)
		if roles(msgs) != "human assistant human assistant" {
			t.Fatalf("transcript %s", roles(msgs))
		}
		reqs := rec.requests()[before:]
		if len(reqs) != 2 || reqs[0].System != planner.SummaryPrompt || len(reqs[0].Tools) != 0 {
			t.Fatalf("requests of the second turn: %d, first system %q", len(reqs), reqs[0].System)
		}
		quoted := reqs[0].Messages[0].Content[0].Text
		if !strings.Contains(quoted, "[1] Person: hello one") || !strings.Contains(quoted, "[2] Planner: Hello there, friend.") ||
			strings.Contains(quoted, "hello two") {
			t.Fatalf("summarization request quotes:\n%.300s", quoted)
		}
		next := reqs[1]
		if !strings.Contains(next.System, "SUMMARY of the earlier talk") || len(next.Messages) != 1 ||
			next.Messages[0].Role != provider.RoleUser || next.Messages[0].Content[0].Text != long("two") {
			t.Fatalf("the model call after compaction: system %q, %d messages", next.System, len(next.Messages))
		}

		// A later compaction folds the earlier summary in.
		got = send(long("three"))
		if !slices.Contains(got, "compacted 4") {
			t.Fatalf("output of the third turn: %v", got)
		}
		reqs = rec.requests()
		var summarizations []provider.Request
		for _, r := range reqs {
			if r.System == planner.SummaryPrompt {
				summarizations = append(summarizations, r)
			}
		}
		if len(summarizations) != 2 || !strings.Contains(summarizations[1].Messages[0].Content[0].Text, "Summary of what came before:\nSUMMARY of the earlier talk") {
			t.Fatalf("second summarization: %d requests", len(summarizations))
		}
		last := reqs[len(reqs)-1]
		if len(last.Messages) != 1 || last.Messages[0].Content[0].Text != long("three") {
			t.Fatalf("the model call after the second compaction has %d messages", len(last.Messages))
		}
		if msgs := transcript(t, svc, id); len(msgs) != 6 {
			t.Fatalf("transcript has %d messages", len(msgs))
		}
	})
}
