package planner_test

import (
	"context"
	"fmt"

	"github.com/ballet/gateway/planner"
	"github.com/ballet/gateway/planner/memstore"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
	trackermem "github.com/ballet/gateway/tracker/memstore"
)

// Example runs one turn of the development planner in memory and prints its live output.
func Example() {
	ctx := context.Background()
	log := memlog.New()
	defer log.Close()
	trk := tracker.NewService(trackermem.New(log), &tracker.Options{AdminSubjects: []string{"alice"}})
	if _, err := trk.CreateProject(ctx, tracker.Actor{Kind: tracker.ActorHuman, Subject: "alice"}, "WEB", "Web"); err != nil {
		panic(err)
	}

	svc := planner.New(memstore.New(log), trk, nil) // the scripted provider, an in-process bus
	defer svc.Close()
	alice := planner.Caller{Subject: "alice", Human: true}
	session, err := svc.CreateSession(ctx, alice, "WEB", "Planning")
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	_, stop, err := svc.Watch(ctx, alice, session.ID, func(o planner.Output) bool {
		switch o.Type {
		case planner.OutputText: // pieces of the answer; the last one quotes the new item
		case planner.OutputToolCall:
			fmt.Printf("tool_call %s %s\n", o.Tool, o.Input)
		case planner.OutputToolResult:
			fmt.Printf("tool_result %s is_error=%v\n", o.Tool, *o.IsError)
		case planner.OutputMessage:
			fmt.Printf("message %d\n", o.Seq)
		case planner.OutputDone:
			fmt.Println("done", o.Text)
			close(done)
		}
		return true
	})
	if err != nil {
		panic(err)
	}
	defer stop()
	if _, err := svc.Send(ctx, alice, session.ID, "create an item called Fix login"); err != nil {
		panic(err)
	}
	<-done
	transcript, _, _ := svc.Transcript(ctx, alice, session.ID)
	fmt.Println("running:", transcript.Running)
	// Output:
	// message 1
	// tool_call create_item {"title":"Fix login"}
	// message 2
	// tool_result create_item is_error=false
	// message 3
	// message 4
	// done end_turn
	// running: false
}
