// Package fault is the one error vocabulary of the domain packages (streams, tracker, planner,
// operator): an *Error carries a Kind (NotFound, Forbidden, Conflict, Precondition, Invalid,
// Limit, Resync, Unavailable), the error it wraps and a detail safe to show the caller.
//
// Each package keeps its sentinels (planner.ErrNotFound, tracker.ErrPrecondition, ...) as
// values made by New, so errors.Is matches the sentinel of one package and not another's of
// the same kind; Errorf and Wrap make the errors callers see. Code, HTTPStatus and ErrorType
// map an error, by the kind of the first *Error it wraps, to its JSON-RPC code, its HTTP
// status and its span's error.type: the gateway, the REST surfaces and the planner's tracing
// ask these three and nothing else. An error of no kind is internal: -32603, 500 and
// "_OTHER", its text for the logs only. Detail returns what the caller may read.
//
// An *Error is not an rpc.Coded error on purpose: the gateway words a refusal (its message,
// its data) and asks Code for the code, so that a domain error never reaches a client unworded.
package fault
