// Package planner runs the AI planner's chat sessions: transcripts, turns, tools acting on the
// tracker, compaction of long contexts, and live output shared by every replica.
//
// Entry points: New returns a Service over a Store (pgstore, or memstore for `dev`), the
// tracker's Service and Options (provider, Bus, lease, max rounds, context budget, an
// Observer for metrics). The gateway calls Send, Cancel and Watch for planner.send,
// planner.cancel and planner.watch; NewHandler serves the sessions' REST routes. Errors
// are package fault's and match ErrNotFound, ErrForbidden, ErrConflict, ErrInvalid and ErrLimit
// (-32004, -32003, -32009, -32602, -32029). ErrLimit's errors (LimitReached) name the limit of
// one person that refused the request: LimitTurns, their turns running at once on all
// replicas (Send), or LimitSessions, the sessions they created in the last minute here
// (CreateSession, 429).
//
// A turn: the model answers (streamed as text and tool_call outputs), its answer is stored,
// the tools it called (Service.Tools; their schemas bound titles and descriptions by the
// tracker's limits) run for the human who sent the message (tracker.Actor{Kind: "agent"},
// that human's permissions checked at each call; failures go back to the model as error
// results), their results are stored, and so on until the model stops or MaxRounds. Each
// stored message emits "message" and appends a planner.message event in the same transaction.
// Every turn ends with exactly one "done" (end_turn, cancelled, error, max_rounds, or the
// model's stop reason), published after the session is free again. When a model call's
// context would exceed the budget (bytes/4 tokens), older messages are summarized by the model
// up to a human message, the summary is stored beside the transcript, "compacted" is emitted,
// and later calls use the summary and the newer messages; the transcript never changes.
//
// Across replicas: one turn per session is a lease row taken atomically and renewed every
// Lease/3; output and cancel requests travel on the Bus (Postgres LISTEN/NOTIFY in pgstore),
// which also delivers a replica's own output to its local watchers. A replica that dies
// mid-turn stops renewing; a replica with watchers of the session, or the next Send, takes the
// expired lease over and publishes error (StaleText) and done "error" exactly once.
//
// Traces (OpenTelemetry API only, Options.TracerProvider; nothing is recorded until the host
// installs an SDK), following the conventions for generative AI:
//
//   - "invoke_agent planner" (internal): one turn, from its first round to its done,
//     child of the span of the planner.send that started it (the caller's trace context
//     arrives with the send's ctx). gen_ai.operation.name invoke_agent, gen_ai.agent.name
//     planner, gen_ai.conversation.id (the session), gen_ai.provider.name,
//     gen_ai.request.model, ballet.project, ballet.planner.turn.id; at its end
//     ballet.planner.turn.done_reason, .rounds (model calls that answered), .outputs,
//     gen_ai.usage.input_tokens and output_tokens (all its calls), and on failure status
//     error with error.type (a provider.ErrorKind, shutdown or lease_lost).
//   - "chat {model}" (client): one model call, retries included, under the turn.
//     gen_ai.operation.name chat, gen_ai.provider.name, gen_ai.request.model,
//     gen_ai.request.max_tokens, gen_ai.conversation.id, ballet.planner.model.purpose (answer,
//     or summary for compaction), ballet.planner.model.retries with a "retry" event for each
//     (attempt, delay_ms, error.type); on success gen_ai.usage.input_tokens, output_tokens and
//     gen_ai.response.finish_reasons; on failure error.type (provider.ErrorKind) and status
//     error; an event "cancelled" when the turn was cancelled meanwhile.
//   - "execute_tool {name}" (internal): one tool call, under the turn, after the model call
//     that asked for it. gen_ai.operation.name execute_tool, gen_ai.tool.name,
//     gen_ai.tool.call.id, gen_ai.tool.type function, ballet.planner.tool.is_error; a failed
//     call has error.type (not_found, forbidden, conflict, precondition_failed, invalid,
//     invalid_input, unknown_tool) and status error. The tracker's database work is under it.
//   - "planner.turn.stale" (internal): a replica ends, for watchers, the turn of one that
//     died; it is in the trace of the send that started that turn, from the trace context
//     kept with the lease, and linked to the send that found the lease expired, if any.
//
// The database work of reading the transcript and storing messages is under the turn. The
// writes of outputs (hundreds in one answer) are the replica's batches, outside every trace:
// they record no spans, and the turn counts its outputs.
//
// Caveats: live output is not replayed, and a watch that misses output (a full queue, a bus
// reconnect) ends with OutputLagging so the client watches again and reloads the transcript.
// A watcher that loses tracker.read (CloseWatches, called when the log says so) gets
// OutputClosed instead of the output still queued for it.
// A tool call that started completes even when its turn is cancelled, and its result is stored.
package planner
