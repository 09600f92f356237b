// Package streams turns the event log into live change streams: it reads the log in seq order,
// routes each event to the subscriptions of its streams, and replays a stream's events after a
// client's from_seq before its live ones, with no gap and no duplicate.
//
// Entry points: a Log (pglog over Postgres, memlog for `dev` and tests) is read by a Tailer,
// which hands each batch to Hub.Dispatch; Hub.Subscribe registers a subscription for a Stream
// ("project:KEY" or "item:KEY", ParseStream), replays from FromSeq through the Log and a cache
// of recent events, and queues its notifications to the connection's Sender, bounded by
// SubscribeRequest's limits. A subscription that cannot keep up, or whose subject loses access
// (member.revoked, project.deleted; HubOptions.OnAccessLost is told), is closed with a Reason. Appender and ProjectStore are the writing side the
// tracker's stores use, and the events they append are the ones the hub delivers.
//
// Off-switch: the build tag noparallel delivers every stream on the dispatching goroutine alone,
// instead of spreading a stream's many subscribers over the CPUs.
package streams
