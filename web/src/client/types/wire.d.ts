/**
 * $/heartbeat's params, both ways
 */
export type HeartbeatParams = {
    /**
     * the sender's clock, Unix milliseconds
     */
    time: number;
};
/**
 * auth's and auth.refresh's params
 */
export type AuthParams = {
    /**
     * an OIDC access token (JWT)
     */
    token: string;
};
/**
 * auth's and auth.refresh's result
 */
export type AuthResult = {
    subject: string;
    /**
     * the token's expiry, Unix seconds
     */
    expires_at: number;
    /**
     * what the server allows; absent from older servers
     */
    limits: Limits;
};
/**
 * the auth and auth.refresh result's "limits": what the server allows, so that a client stays within it without learning it by error
 */
export type Limits = {
    /**
     * stream subscriptions and planner watches per connection
     */
    subscriptions: number;
    /**
     * per connection, in bursts of twice that
     */
    requests_per_second: number;
    /**
     * of the subject's connections on a replica together
     */
    subject_requests_per_second: number;
    /**
     * the largest message the server reads
     */
    message_bytes: number;
    /**
     * queued for the connection, unwritten; beyond, it is closed 1013
     */
    queued_bytes: number;
    /**
     * events replayed at most; more is -32010
     */
    replay: number;
    /**
     * events replayed per second for the subject on a replica
     */
    replay_events_per_second: number;
    /**
     * connections of one subject on a replica
     */
    connections_per_subject: number;
    /**
     * the server's heartbeat interval
     */
    heartbeat_ms: number;
    /**
     * the longest planner.send text, in bytes
     */
    planner_message_bytes?: number | undefined;
    /**
     * the subject's turns running at once, on all replicas
     */
    planner_turns?: number | undefined;
};
/**
 * planner.cancel's params
 */
export type CancelParams = {
    session: string;
};
/**
 * the result of a request that answers nothing but success: {}
 */
export type Empty = object;
/**
 * planner.output's params
 */
export type OutputParams = {
    subscription: string;
    session: string;
    turn: string;
    offset: number;
    type: "text" | "tool_call" | "tool_result" | "message" | "compacted" | "error" | "done";
    text?: string | undefined;
    tool?: string | undefined;
    tool_use_id?: string | undefined;
    /**
     * the tool call's input, a JSON object
     */
    input?: any;
    /**
     * set on every tool_result
     */
    is_error?: boolean | undefined;
    seq?: number | undefined;
};
/**
 * planner.send's params
 */
export type SendParams = {
    session: string;
    text: string;
    /**
     * 1–64 characters
     */
    idempotency_key?: string | undefined;
};
/**
 * planner.send's result
 */
export type SendResult = {
    /**
     * the message's position in the transcript
     */
    seq: number;
};
/**
 * planner.watch's params
 */
export type WatchParams = {
    /**
     * 1–64 characters, unique on the connection
     */
    subscription: string;
    session: string;
    /**
     * resume this turn …
     */
    turn?: string | undefined;
    /**
     * … after this offset
     */
    after?: number | undefined;
};
/**
 * planner.watch's result
 */
export type WatchResult = {
    subscription: string;
    running: boolean;
    turn?: string | undefined;
    /**
     * present when the params named a turn
     */
    resumed?: boolean | undefined;
};
/**
 * presence.changed's params
 */
export type PresenceChangedParams = {
    subscription: string;
    stream: string;
    joined: PresenceSubject[];
    left: PresenceSubject[];
};
/**
 * PresenceSubject names a subject in a presence change
 */
export type PresenceSubject = {
    subject: string;
};
/**
 * presence.get's params
 */
export type PresenceGetParams = {
    stream: string;
    /**
     * on a project: who has each of its items open
     */
    items?: boolean | undefined;
};
/**
 * presence.get's result
 */
export type PresenceGetResult = {
    stream: string;
    members: PresenceMember[];
    truncated: boolean;
    items?: ItemMembers[] | undefined;
    items_truncated?: boolean | undefined;
};
/**
 * one subject present on a stream
 */
export type PresenceMember = {
    subject: string;
    connections: number;
};
/**
 * who has one item open
 */
export type ItemMembers = {
    /**
     * item:<KEY>
     */
    stream: string;
    members: PresenceMember[];
};
/**
 * stream.closed's params
 */
export type ClosedParams = {
    subscription: string;
    reason: "lagging" | "forbidden" | "not_found";
};
/**
 * stream.event's params
 */
export type EventParams = {
    subscription: string;
    seq: number;
    type: string;
    entity_type: string;
    entity_id: string;
    /**
     * null when the event has none
     */
    entity_key: string | null;
    /**
     * Unix milliseconds
     */
    occurred_at: number;
    actor: Actor;
    /**
     * the event's JSON object (a map in MessagePack)
     */
    payload: any;
};
/**
 * who caused an event
 */
export type Actor = {
    kind: "human" | "agent" | "service" | "system";
    subject: string;
};
/**
 * stream.subscribe's params
 */
export type SubscribeParams = {
    /**
     * 1–64 characters, unique on the connection
     */
    subscription: string;
    /**
     * project:<KEY> or item:<KEY>
     */
    stream: string;
    from_seq?: number | undefined;
    /**
     * exact event types or prefixes ending in "*"
     */
    types?: string[] | undefined;
    /**
     * the subject is present on the stream while it lives
     */
    presence?: boolean | undefined;
    /**
     * on a project: who has its items open
     */
    item_presence?: boolean | undefined;
};
/**
 * stream.subscribe's result
 */
export type SubscribeResult = {
    subscription: string;
    /**
     * the stream's position when the subscription started
     */
    seq: number;
};
/**
 * stream.unsubscribe's params
 */
export type UnsubscribeParams = {
    subscription: string;
};
/**
 * system.ping's params: none
 */
export type PingParams = object;
/**
 * system.ping's result
 */
export type PingResult = {
    /**
     * the server's clock, Unix milliseconds
     */
    time: number;
    subject: string;
};
/**
 * every method by name: its params and, for a request, its result
 */
export type Methods = {
    "$/heartbeat": {
        params: HeartbeatParams;
    };
    "auth": {
        params: AuthParams;
        result: AuthResult;
    };
    "auth.refresh": {
        params: AuthParams;
        result: AuthResult;
    };
    "planner.cancel": {
        params: CancelParams;
        result: Empty;
    };
    "planner.output": {
        params: OutputParams;
    };
    "planner.send": {
        params: SendParams;
        result: SendResult;
    };
    "planner.watch": {
        params: WatchParams;
        result: WatchResult;
    };
    "presence.changed": {
        params: PresenceChangedParams;
    };
    "presence.get": {
        params: PresenceGetParams;
        result: PresenceGetResult;
    };
    "stream.closed": {
        params: ClosedParams;
    };
    "stream.event": {
        params: EventParams;
    };
    "stream.subscribe": {
        params: SubscribeParams;
        result: SubscribeResult;
    };
    "stream.unsubscribe": {
        params: UnsubscribeParams;
        result: Empty;
    };
    "system.ping": {
        params: PingParams;
        result: PingResult;
    };
};
