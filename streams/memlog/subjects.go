package memlog

import (
	"context"
	"fmt"
	"time"

	"github.com/ballet/gateway/streams"
)

// ChangeSubject makes the change of the event type typ (streams.EventSubject*) to subject and
// appends that event, like pglog: a sign-out at the current second.
func (l *Log) ChangeSubject(ctx context.Context, typ, subject, actorKind, actorSubject string) (streams.SubjectControl, error) {
	if err := streams.CheckSubjectChange(typ, subject, actorKind, actorSubject); err != nil {
		return streams.SubjectControl{Subject: subject}, fmt.Errorf("%s: %w", typ, err)
	}
	var c streams.SubjectControl
	err := l.update(ctx, func() error {
		var at int64
		if typ == streams.EventSubjectSignedOut {
			at = time.Now().Unix()
		}
		rows, err := prepare([]streams.NewEvent{streams.SubjectEvent(typ, subject, actorKind, actorSubject, at)})
		if err != nil {
			return err
		}
		seq := l.appendLocked(rows)
		cur := l.subjects[subject]
		if cur == nil {
			cur = &streams.SubjectControl{Subject: subject}
			l.subjects[subject] = cur
		}
		cur.SignedOutAt = max(cur.SignedOutAt, at)
		if typ != streams.EventSubjectSignedOut {
			cur.Blocked = typ == streams.EventSubjectBlocked
		}
		cur.Seq = seq
		c = *cur
		return nil
	})
	if err != nil {
		return streams.SubjectControl{Subject: subject}, fmt.Errorf("%s: %w", typ, err)
	}
	return c, nil
}

// SubjectControls returns every subject signed out or blocked.
func (l *Log) SubjectControls(ctx context.Context) ([]streams.SubjectControl, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	cs := make([]streams.SubjectControl, 0, len(l.subjects))
	for _, c := range l.subjects {
		cs = append(cs, *c)
	}
	return cs, nil
}
