package tracker_test

import (
	"context"
	"fmt"

	"github.com/ballet/gateway/internal/fault"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/memstore"
)

// The Service over the memory store: every write appends its events to the log.
func Example() {
	ctx := context.Background()
	log := memlog.New()
	defer log.Close()
	svc := tracker.NewService(memstore.New(log), &tracker.Options{AdminSubjects: []string{"root"}})

	root := tracker.Actor{Kind: tracker.ActorHuman, Subject: "root"}
	planner := tracker.Actor{Kind: tracker.ActorAgent, Subject: "root"} // acting for root
	if _, err := svc.CreateProject(ctx, root, "WEB", "Web site"); err != nil {
		panic(err)
	}
	login, _ := svc.CreateItem(ctx, root, "WEB", tracker.ItemInput{Title: "Login page"})
	sso, _ := svc.CreateItem(ctx, planner, "WEB", tracker.ItemInput{Title: "SSO", State: tracker.StateReady})
	blocked, _, _ := svc.AddDependency(ctx, planner, login.Key, sso.Key)
	fmt.Println(blocked.Key, "version", blocked.Version, "blocked by", blocked.BlockedBy)

	_, err := svc.UpdateItem(ctx, root, login.Key, tracker.ItemPatch{Title: ptr("Login")}, &login.Version)
	fmt.Println("stale write:", err, "→ HTTP", fault.HTTPStatus(err))

	page, _ := svc.ListItems(ctx, root, "WEB", tracker.ItemFilter{State: tracker.StateReady}, tracker.ItemPage{Limit: 10})
	fmt.Println(len(page.Items), "ready item at seq", page.Seq, "last page:", page.Next == 0)
	evs, _ := log.ReadAfter(ctx, 0, 100)
	for _, e := range evs {
		fmt.Println(e.Seq, e.Type, e.EntityKey, e.ActorKind)
	}
	// Output:
	// WEB-1 version 2 blocked by [WEB-2]
	// stale write: item WEB-1 is at version 2, not 1 → HTTP 412
	// 1 ready item at seq 5 last page: true
	// 1 project.created WEB human
	// 2 member.granted WEB human
	// 3 item.created WEB-1 human
	// 4 item.created WEB-2 agent
	// 5 dependency.added WEB-1 agent
}

func ptr[T any](v T) *T { return &v }
