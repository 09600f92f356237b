package trackertest

import (
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/tracker"
)

// Open returns a fresh, empty store and the event log it appends to; cleanups are registered
// on t.
type Open func(t *testing.T) (tracker.Store, streams.Log)

// Admin is the admin subject of the suite's services.
const Admin = "root"

// Actors of the suite.
var (
	Root  = tracker.Actor{Kind: tracker.ActorHuman, Subject: Admin}
	Alice = tracker.Actor{Kind: tracker.ActorHuman, Subject: "alice"} // admin of WEB
	Bob   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "bob"}   // member of WEB
	Vic   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "vic"}   // viewer of WEB
	Eve   = tracker.Actor{Kind: tracker.ActorHuman, Subject: "eve"}   // no role
	Agent = tracker.Actor{Kind: tracker.ActorAgent, Subject: "bob"}   // the planner for bob
	Bot   = tracker.Actor{Kind: tracker.ActorService, Subject: "bot"} // a service, member of WEB
)

// Run runs the suite, one test after another; each subtest opens its own store. When the log
// is also a streams.ProjectStore, projects made through it are checked too.
func Run(t *testing.T, open Open) { run(t, open, false) }

// RunParallel is Run with the tests in parallel, for stores that share nothing and take most of
// a test's time to open (pgstore's, each on a database of its own).
func RunParallel(t *testing.T, open Open) { run(t, open, true) }

func run(t *testing.T, open Open, parallel bool) {
	tests := []struct {
		name string
		f    func(t *testing.T, h *harness)
	}{
		{"Projects", testProjects},
		{"Members", testMembers},
		{"CreateAndNumbering", testCreate},
		{"UpdateVersionsAndEvents", testUpdate},
		{"Preconditions", testPreconditions},
		{"Dependencies", testDependencies},
		{"Cycles", testCycles},
		{"DeleteCascades", testDeleteCascades},
		{"Permissions", testPermissions},
		{"Validation", testValidation},
		{"Filters", testFilters},
		{"Paging", testPaging},
		{"PagingWhileWriting", testPagingWhileWriting},
		{"PagedRecipe", testPagedRecipe},
		{"CancelledWritesAppendNothing", testCancelled},
		{"SnapshotSeqUnderConcurrentWrites", testSnapshotConsistency},
		{"ConcurrentNumbering", testConcurrentNumbering},
		{"ProjectsMadeByOtherWriters", testForeignProjects},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			store, log := open(t)
			h := &harness{t: t, store: store, log: log, svc: tracker.NewService(store, &tracker.Options{AdminSubjects: []string{Admin}})}
			tc.f(t, h)
		})
	}
}
