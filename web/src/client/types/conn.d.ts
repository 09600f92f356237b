/**
 * refreshDelay is the wait until 80 % of the span from issued to exp
 * (Unix milliseconds) has passed, and at least MIN_REFRESH_MS.
 * @param {number} issued @param {number} exp @param {number} now
 */
export function refreshDelay(issued: number, exp: number, now: number): number;
/** @typedef {import('./limits.js').Limits} Limits */
/** The shortest wait between two auth.refresh attempts. */
export const MIN_REFRESH_MS: 1000;
/**
 * @typedef {object} ConnOptions
 * @property {string} url
 * @property {number} gen the client's connection counter
 * @property {import('./codec.js').Codec} codec
 * @property {any} WebSocket the WebSocket constructor
 * @property {number} [heartbeatInterval] ms, the user's; 0 or undefined: the server's
 * @property {number} maxBuffered bytes the socket may hold unsent
 * @property {number} rateLimitRetries for auth.refresh, see ClientOptions
 * @property {(method: string) => (import('./trace.js').TraceContext|null|undefined)} [traceContext] see ClientOptions
 * @property {(conn: Conn, method: string, params: any) => void} onNotification
 * @property {(conn: Conn) => void} onEnd called once, synchronously, when the connection ends
 * @property {{debug: Function, info: Function, warn: Function}} logger
 */
/**
 * Link is what a connection is whatever carries it: pending calls by id,
 * dispatch of what arrives, silence detection, token refresh and how it
 * ends. A subclass provides transmit (one message out), and die.
 */
export class Link {
    /** @param {ConnOptions} o */
    constructor(o: ConnOptions);
    o: ConnOptions;
    gen: number;
    codec: import("./codec.js").Codec;
    /** @type {Map<number, {resolve: (v: any) => void, reject: (e: any) => void}>} */
    pending: Map<number, {
        resolve: (v: any) => void;
        reject: (e: any) => void;
    }>;
    nextId: number;
    subject: string;
    /** @type {Error|null} why the connection ended, once it has */
    error: Error | null;
    lastRecv: number;
    lastSent: number;
    started: boolean;
    /** @type {Limits|null} what the auth (or the last auth.refresh) result advertised */
    limits: Limits | null;
    /** @type {any[]} */
    timers: any[];
    /** @type {any} */
    refreshTimer: any;
    /** @type {Promise<Error>} resolves with the reason when the connection ends */
    ended: Promise<Error>;
    endResolve: (err: Error) => void;
    /**
     * watching says whether silence now means a dead connection: always on a
     * socket; over HTTP only while a response is open.
     * @returns {boolean}
     */
    get watching(): boolean;
    /** sendsHeartbeats says whether the client sends $/heartbeat (not over HTTP). */
    get sendsHeartbeats(): boolean;
    /**
     * transmit sends one message; it throws when the connection has ended.
     * @param {object} msg @returns {void}
     */
    transmit(msg: object): void;
    /**
     * die ends the connection at once for err (the first reason wins) and
     * releases what carries it, closing a socket with code.
     * @param {Error} err @param {number} code @returns {void}
     */
    die(err: Error, code: number): void;
    /**
     * start begins heartbeats and token refresh once auth succeeded.
     * @param {number} issued Unix ms when auth was sent
     * @param {number} expiresAt Unix seconds from the auth result
     * @param {(signal: AbortSignal) => Promise<string>} token
     * @param {number} callTimeout ms for auth.refresh
     */
    start(issued: number, expiresAt: number, token: (signal: AbortSignal) => Promise<string>, callTimeout: number): void;
    keepalive(): void;
    /**
     * @param {number} issued @param {number} exp Unix ms
     * @param {(signal: AbortSignal) => Promise<string>} token
     * @param {number} callTimeout
     */
    scheduleRefresh(issued: number, exp: number, token: (signal: AbortSignal) => Promise<string>, callTimeout: number): void;
    /** @param {unknown} limits the auth result's, when it is an object */
    setLimits(limits: unknown): void;
    /**
     * request sends a request like call; a refusal for a rate (LimitError
     * with limit "requests", "subject_requests" or "replay") is sent again
     * after its retryAfterMs, with jitter, up to retries times (Infinity:
     * for as long as the connection and signal last). The server refuses
     * such a request before handling it, so sending it again is safe for
     * every method.
     * signal abandons it all; timeout (ms), when set, bounds each attempt
     * instead (the client's own calls).
     * @param {string} method
     * @param {any} params
     * @param {{signal?: AbortSignal, retries?: number, timeout?: number}} [opts]
     * @returns {Promise<any>}
     */
    request(method: string, params: any, { signal, retries, timeout }?: {
        signal?: AbortSignal;
        retries?: number;
        timeout?: number;
    }): Promise<any>;
    /**
     * pause waits ms; it rejects with the signal's reason when it is aborted
     * and with ConnectionLostError when the connection ends first.
     * @param {number} ms @param {AbortSignal} [signal]
     * @returns {Promise<void>}
     */
    pause(ms: number, signal?: AbortSignal): Promise<void>;
    /**
     * call sends a request and resolves with its result; a connection that
     * ends first rejects with ConnectionLostError, an error reply with
     * RpcError (LimitError for -32029), an aborted signal with its reason.
     * @param {string} method
     * @param {any} params
     * @param {AbortSignal} [signal]
     * @returns {Promise<any>}
     */
    call(method: string, params: any, signal?: AbortSignal): Promise<any>;
    /**
     * notify sends a notification; it throws when the connection has ended.
     * @param {string} method @param {any} params
     */
    notify(method: string, params: any): void;
    lostError(): ClosedError | ConnectionLostError;
    /**
     * dispatch serves one message that arrived: a notification to
     * onNotification, an answer to its pending call.
     * @param {any} msg
     */
    dispatch(msg: any): void;
    /**
     * refuseRequest answers a request from the server with -32601 where it can.
     * @param {unknown} id @param {string} method
     */
    refuseRequest(id: unknown, method: string): void;
    /** @param {Error} err */
    end(err: Error): void;
}
/** Conn is one authenticated (or authenticating) WebSocket. */
export class Conn extends Link {
    /** @type {'websocket'} */
    transport: "websocket";
    /** Whether the socket opened: one that never did may be refused by a proxy. */
    wasOpen: boolean;
    ws: any;
    /** @type {(err: Error) => void} */
    openReject: (err: Error) => void;
    /** @type {Promise<void>} resolves when the socket is open */
    opened: Promise<void>;
    /**
     * handshake opens the socket, checks the subprotocol and authenticates
     * with token, within timeoutMs. It returns the auth result.
     * @param {string} token
     * @param {number} timeoutMs
     * @returns {Promise<import('./wire.js').AuthResult>}
     */
    handshake(token: string, timeoutMs: number): Promise<import("./wire.js").AuthResult>;
    /** @param {object} msg */
    send(msg: object): void;
    /** @param {any} data */
    receive(data: any): void;
    /** closeNormal closes with 1000 and resolves when the socket has closed, or after a grace period. */
    closeNormal(): Promise<any>;
}
export type Limits = import("./limits.js").Limits;
export type ConnOptions = {
    url: string;
    /**
     * the client's connection counter
     */
    gen: number;
    codec: import("./codec.js").Codec;
    /**
     * the WebSocket constructor
     */
    WebSocket: any;
    /**
     * ms, the user's; 0 or undefined: the server's
     */
    heartbeatInterval?: number | undefined;
    /**
     * bytes the socket may hold unsent
     */
    maxBuffered: number;
    /**
     * for auth.refresh, see ClientOptions
     */
    rateLimitRetries: number;
    /**
     * see ClientOptions
     */
    traceContext?: ((method: string) => (import("./trace.js").TraceContext | null | undefined)) | undefined;
    onNotification: (conn: Conn, method: string, params: any) => void;
    /**
     * called once, synchronously, when the connection ends
     */
    onEnd: (conn: Conn) => void;
    logger: {
        debug: Function;
        info: Function;
        warn: Function;
    };
};
import { ClosedError } from './errors.js';
import { ConnectionLostError } from './errors.js';
