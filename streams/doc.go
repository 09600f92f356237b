// Package streams turns the event log into live change streams: it reads the log in seq order,
// routes each event to the subscriptions of its streams, and replays a stream's events after a
// client's from_seq before its live ones, with no gap and no duplicate.
//
// Entry points: a Log (pglog over Postgres, memlog for `dev` and tests) is read by a Tailer,
// which hands each batch to Hub.Dispatch. Dispatch adds the events to one window of recent
// events (each held once, encoded once per codec in use, bounded in bytes by
// HubOptions.RecentBytes) and wakes the subscriptions of their streams. Hub.Subscribe
// registers a subscription for a Stream ("project:KEY" or "item:KEY", ParseStream): a
// position in it, from FromSeq (a replay, counted within ReplayLimit) or the head. Its
// connection, the Sender, is told when it has events (Ready) and pulls them as its socket
// takes them (Subscription.Pull). A subscription behind the window catches up from the Log a
// page at a time, paced by its CatchUp hook, or, more than HubOptions.CatchUpLimit events
// behind, is closed with ReasonLagging; one whose subject loses access
// (member.revoked, project.deleted; HubOptions.OnAccessLost is told) is closed with a Reason
// once it has sent the events before. Appender and ProjectStore are the writing side the
// tracker's stores use, and the events they append are the ones the hub delivers.
//
// Off-switch: the build tag noparallel wakes every stream's subscribers on the dispatching
// goroutine alone, instead of spreading a stream's many subscribers over the CPUs.
package streams
