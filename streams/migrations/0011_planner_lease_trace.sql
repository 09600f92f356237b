-- planner_leases.traceparent and tracestate are the W3C trace context of the planner.send that
-- started the turn holding the lease ('' when it came untraced): a replica that ends the turn of
-- one that died records its span in that trace. Replicas of an earlier version write '' and do
-- not read them.

ALTER TABLE planner_leases
    ADD COLUMN traceparent text NOT NULL DEFAULT '',
    ADD COLUMN tracestate  text NOT NULL DEFAULT '';
