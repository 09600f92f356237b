// Package subqueue bounds what one subscription has queued on its connection: the frames
// handed to the connection and not yet written. Stream events (streams.Subscription),
// presence changes and planner output each count theirs in a Queue.
//
// Entry points: New or Init set the bound; Reserve claims room for frames before they are
// handed over, all or none, Unreserve gives back a claim the connection refused, and Written
// is the connection's done callback. Close refuses every later claim; Wait lets a replay
// wait for room instead of overflowing.
//
// Caveats: the queue holds no frames and orders none (the connection does); what a full
// queue means is its owner's choice, which for every subscription is to close it lagging.
package subqueue
