/**
 * rpcError is the error for an error answer: a LimitError for -32029, an
 * RpcError otherwise.
 * @param {number} code @param {string} message @param {any} [data]
 * @returns {RpcError}
 */
export function rpcError(code: number, message: string, data?: any): RpcError;
/**
 * errorCode returns the JSON-RPC code of err (an RpcError or a
 * StreamClosedError), or 0.
 * @param {unknown} err
 * @returns {number}
 */
export function errorCode(err: unknown): number;
/** JSON-RPC error codes of the realtime API. */
export const Code: Readonly<{
    ParseError: -32700;
    InvalidRequest: -32600;
    MethodNotFound: -32601;
    InvalidParams: -32602;
    InternalError: -32603;
    Unauthenticated: -32001;
    Forbidden: -32003;
    NotFound: -32004;
    Conflict: -32009;
    ResyncRequired: -32010;
    /** An extension, numbered like HTTP's 429: see LimitError. */
    LimitExceeded: -32029;
}>;
/** WebSocket close codes of the realtime API. */
export const CloseCode: Readonly<{
    Normal: 1000;
    GoingAway: 1001;
    /** A frame that breaks RFC 6455, such as one not masked. */
    ProtocolError: 1002;
    UnsupportedData: 1003;
    PolicyViolation: 1008;
    InvalidFramePayloadData: 1007;
    TooBig: 1009;
    TryAgainLater: 1013;
    HeartbeatTimeout: 4000;
    Unauthenticated: 4001;
    /** The subject has too many connections (after a -32029 answer to auth). */
    LimitExceeded: 4029;
}>;
/**
 * The limits of LimitError.limit: those a server refuses with -32029, and
 * PlannerMessageBytes, which the client refuses itself (the server's
 * refusal of a longer text is -32602 without data).
 */
export const Limit: Readonly<{
    /** stream subscriptions and planner watches of a connection */
    Subscriptions: "subscriptions";
    /** requests per second of a connection */
    Requests: "requests";
    /** requests per second of one subject's connections on a replica together */
    SubjectRequests: "subject_requests";
    /** events replayed per second for one subject on a replica */
    Replay: "replay";
    /** connections of one subject on a replica */
    ConnectionsPerSubject: "connections_per_subject";
    /** planner turns of one subject running at once, on all replicas */
    PlannerTurns: "planner_turns";
    /** bytes (UTF-8) of a planner.send text; refused by the client only */
    PlannerMessageBytes: "planner_message_bytes";
}>;
/** An error answered by the server; code is one of Code. */
export class RpcError extends Error {
    /**
     * @param {number} code
     * @param {string} message
     * @param {unknown} [data]
     */
    constructor(code: number, message: string, data?: unknown);
    code: number;
    data: unknown;
}
/**
 * A server limit was reached: the server's -32029 answer, or the client's
 * own refusal of what would go beyond a limit the server advertised (then
 * nothing was sent): a subscription beyond Limit.Subscriptions, a planner
 * message beyond Limit.PlannerMessageBytes. It is an RpcError with the
 * code the server answers beyond the limit: Code.InvalidParams for
 * Limit.PlannerMessageBytes, Code.LimitExceeded for the others. limit is
 * one of Limit, max its value, retryAfterMs (for the rates:
 * Limit.Requests, Limit.SubjectRequests, Limit.Replay) when the server
 * takes the request again.
 */
export class LimitError extends RpcError {
    /**
     * @param {string} limit
     * @param {number} max
     * @param {number} [retryAfterMs]
     * @param {string} [message]
     * @param {unknown} [data]
     */
    constructor(limit: string, max: number, retryAfterMs?: number, message?: string, data?: unknown);
    limit: string;
    max: number;
    retryAfterMs: number;
}
/** The client was closed. */
export class ClosedError extends Error {
    constructor(message?: string);
}
/**
 * A call's connection ended before the answer came; the request may or may
 * not have been processed.
 */
export class ConnectionLostError extends Error {
    /** @param {string} message @param {unknown} [cause] */
    constructor(message?: string, cause?: unknown);
}
/** Nothing came from the server for three heartbeat intervals. */
export class HeartbeatTimeoutError extends Error {
    constructor();
}
/**
 * The WebSocket closed (or never opened); closeCode and reason are what the
 * close event said (1006 when the connection just failed).
 */
export class SocketClosedError extends Error {
    /** @param {number} closeCode @param {string} [reason] */
    constructor(closeCode: number, reason?: string);
    closeCode: number;
    reason: string;
}
/** A connection attempt took longer than the connect timeout. */
export class ConnectTimeoutError extends Error {
    constructor();
}
/** The server did not accept the codec's subprotocol. */
export class SubprotocolError extends Error {
    /** @param {string} offered */
    constructor(offered: string);
}
/** The server sent a frame of the other codec's kind (or an undecodable one). */
export class FrameError extends Error {
    /** @param {string} message */
    constructor(message: string);
}
/**
 * The server ended a subscription (stream.closed) with a reason other than
 * lagging: "forbidden" or "not_found". code matches the RpcError of the
 * same meaning.
 */
export class StreamClosedError extends Error {
    /** @param {string} subscription @param {string} reason */
    constructor(subscription: string, reason: string);
    subscription: string;
    reason: string;
    code: -32003 | -32004 | undefined;
}
/** A subscription held more events than its buffer while being re-established. */
export class OverflowError extends Error {
    constructor();
}
