-- What operators have taken from subjects: a sign-out refuses the subject's tokens issued at or
-- before signed_out_at (Unix seconds; 0: never signed out), a block refuses all of them. Each
-- change appends its event (subject.signed_out, subject.blocked, subject.unblocked, project_key
-- '') in the same transaction, after that event, and records its seq: a gateway loads the table
-- when it starts and applies the events it tails after, skipping those a row already includes.

CREATE TABLE subject_controls (
    subject       text        PRIMARY KEY,
    signed_out_at bigint      NOT NULL DEFAULT 0,
    blocked       boolean     NOT NULL DEFAULT false,
    seq           bigint      NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    updated_by    text        NOT NULL
);
