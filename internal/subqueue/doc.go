// Package subqueue bounds what one subscription has queued on its connection: the frames
// handed to the connection and not yet written. Presence changes and planner output each count
// theirs in a Queue (stream events are pulled, not queued: streams.Subscription).
//
// Entry points: New or Init set the bound; Reserve claims room for frames before they are
// handed over, all or none, Unreserve gives back a claim the connection refused, and Written
// is the connection's done callback. Close refuses every later claim.
//
// Caveats: the queue holds no frames and orders none (the connection does); what a full
// queue means is its owner's choice, which for every subscription is to close it lagging.
package subqueue
