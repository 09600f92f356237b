// Package operator is the operators' REST API for subjects, at /api/v1/admin/:
//
//	POST   /api/v1/admin/subjects/{subject}/sign-out   refuse its tokens issued until now
//	PUT    /api/v1/admin/subjects/{subject}/block      refuse all its tokens
//	DELETE /api/v1/admin/subjects/{subject}/block      accept them again
//	GET    /api/v1/admin/connections                   every live replica's connections
//
// Each answers 204 once the change and its event (subject.signed_out, subject.blocked,
// subject.unblocked) are in the store; every gateway applies the event as its tailer reads
// it, closing the subject's connections. The listing of connections asks every live replica
// and waits ListWait for their answers (Options.Connections). Only the subjects of Options.Admins
// (BALLET_ADMIN_SUBJECTS) may call them: others get 403, a request without a valid token 401.
//
// Each replica applies the actions it reads from the log (apply.go): LoadSubjectControls fills
// the revocations at start, ApplySubjectEvent keeps them and closes the subject's connections
// through the SubjectCloser the gateway's server fills. NewHandler serves the API; the listing
// of connections is in listing.go, a listed connection in connection.go.
package operator
