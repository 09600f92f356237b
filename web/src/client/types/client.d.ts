/**
 * dial creates a Client and makes its first connection (see
 * Client.connect).
 * @param {string} url
 * @param {ClientOptions} options
 * @param {{retry?: boolean}} [connectOptions]
 * @returns {Promise<Client>}
 */
export function dial(url: string, options: ClientOptions, connectOptions?: {
    retry?: boolean;
}): Promise<Client>;
/**
 * Client is a connection to the realtime API (JSON-RPC 2.0 over WebSocket,
 * or over streaming HTTP where a proxy refuses the WebSocket: see the
 * transport option) that survives disconnects: it authenticates first, refreshes the token at
 * 80 % of its lifetime, sends $/heartbeat and treats three silent intervals
 * as a dead connection, reconnects with full-jitter backoff, and resumes
 * every subscription from the last seq it delivered. It keeps within the
 * limits the auth result advertises (see limits): the server's heartbeat
 * interval, no subscription beyond its limit and no planner message beyond
 * its bytes (LimitError), requests refused for a rate sent again after
 * retry_after_ms, and a long backoff when the subject has too many
 * connections (close 4029).
 */
export class Client {
    /**
     * @param {string} url ws:// or wss:// URL of the gateway's /rpc
     * @param {ClientOptions} options
     */
    constructor(url: string, options: ClientOptions);
    url: string;
    /** Which transport each connection uses. */
    _transports: Transports;
    o: {
        token: (signal: AbortSignal) => (string | Promise<string>);
        codec: import("./codec.js").Codec;
        WebSocket: any;
        fetch: typeof fetch;
        readLimit: number;
        heartbeatInterval: number;
        connectTimeout: number;
        callTimeout: number;
        minBackoff: number;
        maxBackoff: number;
        maxBuffered: number;
        rateLimitRetries: number;
        onStateChange: (state: State, err?: Error) => void;
        logger: Logger | Readonly<{
            debug(): void;
            info(): void;
            /** @param {string} msg @param {object} [attrs] */
            warn(msg: string, attrs?: object): void;
        }>;
        random: () => number;
        traceContext: ((method: string) => (import("./trace.js").TraceContext | null | undefined)) | undefined;
    };
    log: Logger | Readonly<{
        debug(): void;
        info(): void;
        /** @param {string} msg @param {object} [attrs] */
        warn(msg: string, attrs?: object): void;
    }>;
    /** @type {State} */
    _state: State;
    _started: boolean;
    _everConnected: boolean;
    _closed: boolean;
    /** @type {Deferred<void>} resolved by close() */
    _closing: Deferred<void>;
    /** @type {Conn|HttpConn|null} */
    _cur: Conn | HttpConn | null;
    /** @type {Deferred<Conn|HttpConn>} resolved when the next connection is current */
    _ready: Deferred<Conn | HttpConn>;
    _gen: number;
    _subject: string;
    /** @type {Conn|HttpConn|null} the connection whose limits are known */
    _limitsConn: Conn | HttpConn | null;
    /** @type {Map<string, Subscription|Watch>} subscriptions and watches, in creation order */
    _subs: Map<string, Subscription | Watch>;
    _nextID: number;
    _restoring: boolean;
    _again: boolean;
    _backoff: Backoff;
    /** The connection state. */
    get state(): State;
    /** The authenticated subject (from the auth result), or "" before the first connection. */
    get subject(): string;
    /**
     * The limits the server advertised on the current (or the last)
     * connection, with the wire's names (subscriptions, requests_per_second,
     * message_bytes, replay, connections_per_subject, heartbeat_ms); null
     * before the first connection and from a server that advertises none
     * (an older one: nothing is enforced locally then).
     * @returns {import('./limits.js').Limits|null}
     */
    get limits(): import("./limits.js").Limits | null;
    /** Whether close() was called. */
    get closed(): boolean;
    /**
     * The transport of the current connection: "websocket", "http", or null
     * while there is none.
     * @returns {import('./transport.js').Transport|null}
     */
    get transport(): import("./transport.js").Transport | null;
    /**
     * connect makes the first connection. By default it rejects with that
     * connection's error, such as a refused token (RpcError with code
     * Code.Unauthenticated), and the client is closed; with retry, it keeps
     * trying with backoff (reporting each failure through onStateChange)
     * until a connection is made or close() is called. Once connected, later
     * disconnects are repaired in the background until close().
     * @param {{retry?: boolean}} [opts]
     * @returns {Promise<void>}
     */
    connect(opts?: {
        retry?: boolean;
    }): Promise<void>;
    /**
     * close ends the connection with a normal closure, stops reconnecting and
     * ends every subscription with ClosedError. It is safe to call twice.
     * @returns {Promise<void>} resolves when the socket has closed (or after a short grace)
     */
    close(): Promise<void>;
    /**
     * dropConnection ends the current connection abruptly, as a network
     * failure would; the client reconnects and resumes its subscriptions.
     * For tests and debugging.
     */
    dropConnection(): void;
    /**
     * call sends a request and resolves with its result. While the client is
     * reconnecting it waits for the next connection. A call whose connection
     * ends before the answer is not repeated: it rejects with
     * ConnectionLostError. Errors from the server are RpcError (LimitError
     * for -32029); a refusal for the request rate is sent again first, up to
     * rateLimitRetries times.
     * @param {string} method
     * @param {object} [params]
     * @param {CallOptions} [opts]
     * @returns {Promise<any>}
     */
    call(method: string, params?: object, opts?: CallOptions): Promise<any>;
    /**
     * notify sends a notification, waiting for a connection like call.
     * @param {string} method @param {object} [params] @param {CallOptions} [opts]
     */
    notify(method: string, params?: object, opts?: CallOptions): Promise<void>;
    /**
     * ping checks the connection end to end (system.ping).
     * @param {CallOptions} [opts]
     * @returns {Promise<import('./wire.js').PingResult>}
     */
    ping(opts?: CallOptions): Promise<import("./wire.js").PingResult>;
    /**
     * subscribe subscribes to a change stream ("project:<KEY>" or
     * "item:<KEY>"). Its events reach onEvent each exactly once and in seq
     * order, across reconnects. Errors from the server are RpcError with codes
     * Forbidden, NotFound, InvalidParams or ResyncRequired (with fromSeq).
     * Beyond the server's subscription limit (stream subscriptions and
     * planner watches together) it rejects with LimitError at once, without
     * a request.
     * @param {string} stream
     * @param {import('./subscription.js').SubscribeOptions} [opts]
     * @returns {Promise<Subscription>}
     */
    subscribe(stream: string, opts?: import("./subscription.js").SubscribeOptions): Promise<Subscription>;
    /**
     * unsubscribe ends the stream subscription or planner watch with this id
     * (stream.unsubscribe). An id the client does not know rejects with
     * RpcError NotFound.
     * @param {string} id
     * @param {CallOptions} [opts]
     */
    unsubscribe(id: string, opts?: CallOptions): Promise<void>;
    /**
     * plannerWatch watches a planner session's output (planner.watch) until
     * unsubscribe. After a reconnect, a lagging close or a gap it watches
     * again from the last output delivered, so onOutput sees each output
     * once, in order; onResume runs only when the server cannot replay
     * (reload the transcript). It counts against the subscription limit like
     * subscribe.
     * @param {string} session
     * @param {import('./watch.js').WatchOptions} [opts]
     * @returns {Promise<Watch>}
     */
    plannerWatch(session: string, opts?: import("./watch.js").WatchOptions): Promise<Watch>;
    /**
     * plannerSend stores the human's message in session and starts the
     * planner's turn (planner.send). While another turn runs it rejects with
     * RpcError Conflict. The message carries an idempotency key (random unless
     * opts.idempotencyKey is set), so unlike call, a send whose connection
     * ends before the answer is sent again with the same key on the next
     * connection: the message is stored once. A text of more bytes of UTF-8
     * than the server's planner_message_bytes is not sent: it rejects with a
     * LimitError (Limit.PlannerMessageBytes, code InvalidParams, as the
     * server's refusal would be).
     * @param {string} session @param {string} text @param {import('./watch.js').SendOptions} [opts]
     * @returns {Promise<import('./wire.js').SendResult>} the message's position in the transcript
     */
    plannerSend(session: string, text: string, opts?: import("./watch.js").SendOptions): Promise<import("./wire.js").SendResult>;
    /**
     * plannerCancel stops the session's running turn, if any (planner.cancel).
     * @param {string} session @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    plannerCancel(session: string, opts?: CallOptions): Promise<void>;
    /**
     * presenceGet asks who is present on a stream now, on every replica
     * (presence.get, an extension; needs tracker.read).
     * @param {string} stream @param {CallOptions} [opts]
     * @returns {Promise<import('./wire.js').PresenceGetResult>}
     */
    presenceGet(stream: string, opts?: CallOptions): Promise<import("./wire.js").PresenceGetResult>;
    /**
     * presenceGetItems is presenceGet of a project (project:<KEY>) that also
     * answers who has each of its items open (items, items_truncated).
     * @param {string} stream
     * @param {CallOptions} [opts]
     * @returns {Promise<import('./wire.js').PresenceGetResult & {items: import('./wire.js').ItemMembers[], items_truncated: boolean}>}
     */
    presenceGetItems(stream: string, opts?: CallOptions): Promise<import("./wire.js").PresenceGetResult & {
        items: import("./wire.js").ItemMembers[];
        items_truncated: boolean;
    }>;
    /** @param {State} state @param {Error} [err] */
    _setState(state: State, err?: Error): void;
    _stateReported: boolean | undefined;
    _newID(): string;
    /**
     * @param {Subscription|Watch} e @param {AbortSignal|undefined} signal @param {string} what
     */
    _first(e: Subscription | Watch, signal: AbortSignal | undefined, what: string): Promise<Subscription | Watch>;
    /**
     * _connect opens and authenticates connection gen over the transport
     * the client is on, and over HTTP when a WebSocket fails before it opens
     * (transport "auto").
     * @param {number} gen
     * @returns {Promise<Conn|HttpConn>}
     */
    _connect(gen: number): Promise<Conn | HttpConn>;
    /**
     * @param {import('./transport.js').Transport} transport @param {number} gen
     * @returns {Conn|HttpConn}
     */
    _newConn(transport: import("./transport.js").Transport, gen: number): Conn | HttpConn;
    /**
     * _handshake authenticates cn with tok and starts it; cn dies when it fails.
     * @param {Conn|HttpConn} cn @param {string} tok
     * @param {(signal: AbortSignal) => Promise<string>} token
     */
    _handshake(cn: Conn | HttpConn, tok: string, token: (signal: AbortSignal) => Promise<string>): Promise<void>;
    /** @param {Conn|HttpConn} cn @returns {boolean} false when the client closed meanwhile */
    _setCurrent(cn: Conn | HttpConn): boolean;
    /**
     * _lost forgets cn as the current connection the moment it ends, so that
     * calls wait for the next one.
     * @param {Conn|HttpConn} cn
     */
    _lost(cn: Conn | HttpConn): void;
    /**
     * _run serves connections: when one ends, it reconnects.
     * @param {Conn|HttpConn} cn
     */
    _run(cn: Conn | HttpConn): Promise<void>;
    /**
     * _attempts connects with backoff until it succeeds or the client closes,
     * after cause ended the last connection. The first try of a fresh client
     * is immediate.
     * @param {Error} [cause]
     * @returns {Promise<Conn|HttpConn|null>}
     */
    _attempts(cause?: Error): Promise<Conn | HttpConn | null>;
    /**
     * _delay is the wait before the next attempt after cause. A subject at
     * its connection limit waits near maxBackoff, since other connections
     * must end first. (Browsers do not show why a handshake failed, so a full
     * replica's 503 is an ordinary failure here.)
     * @param {Error} [cause]
     */
    _delay(cause?: Error): number;
    /**
     * _waitConn returns the current connection, waiting while the client
     * reconnects.
     * @param {AbortSignal} [signal]
     * @returns {Promise<Conn|HttpConn>}
     */
    _waitConn(signal?: AbortSignal): Promise<Conn | HttpConn>;
    /** _kick runs restoreAll on the current connection, one run at a time. */
    _kick(): void;
    /**
     * _restoreAll subscribes again every entry not subscribed on cn, in the
     * order they were created.
     * @param {Conn|HttpConn} cn
     */
    _restoreAll(cn: Conn | HttpConn): Promise<void>;
    /**
     * _route serves the notifications the server sends on cn, in order.
     * @param {Conn|HttpConn} cn @param {string} method @param {any} params
     */
    _route(cn: Conn | HttpConn, method: string, params: any): void;
}
export type State = "connecting" | "connected" | "reconnecting" | "closed";
export type Logger = {
    debug: (msg: string, attrs?: object) => void;
    info: (msg: string, attrs?: object) => void;
    warn: (msg: string, attrs?: object) => void;
};
export type ClientOptions = {
    /**
     * Supplies an OIDC access token; called before every connection's auth
     * and before every auth.refresh. Required.
     */
    token: (signal: AbortSignal) => (string | Promise<string>);
    /**
     * Default "msgpack"
     * (over the WebSocket; HTTP is always JSON).
     */
    codec?: import("./codec.js").Codec | "msgpack" | "json" | undefined;
    /**
     * The WebSocket constructor. Default globalThis.WebSocket.
     */
    WebSocket?: any;
    /**
     * "websocket"
     * or "http" (POST /rpc, streaming NDJSON) forces one. Default "auto": the
     * WebSocket, and HTTP when its socket fails before it opens while HTTP
     * works (a proxy that refuses WebSocket upgrades); HTTP is then kept,
     * across reconnects, and the WebSocket is tried again only at a reconnect
     * after websocketRetryInterval.
     */
    transport?: import("./transport.js").TransportMode | undefined;
    /**
     * ms on HTTP after a fall back
     * before a reconnect tries the WebSocket again. Default 300000 (5 minutes).
     */
    websocketRetryInterval?: number | undefined;
    /**
     * For HTTP. Default globalThis.fetch.
     */
    fetch?: typeof fetch | undefined;
    /**
     * bytes of one line over HTTP; a longer one
     * ends the connection. Default 8 MiB.
     */
    readLimit?: number | undefined;
    /**
     * The clock of websocketRetryInterval. Default Date.now.
     */
    now?: (() => number) | undefined;
    /**
     * ms between $/heartbeat; three silent
     * intervals end the connection. Default: the server's interval, as its
     * auth result advertises it (heartbeat_ms), or 15000 from a server that
     * advertises none. When set and the server advertises another interval,
     * heartbeats are sent at the shorter of the two (the server closes a
     * connection silent for three of its intervals) and the connection is
     * given up after three of the longer (the server sends its heartbeats only
     * every interval of its own).
     */
    heartbeatInterval?: number | undefined;
    /**
     * ms for one attempt: open and auth. Default 10000.
     */
    connectTimeout?: number | undefined;
    /**
     * ms for the client's own calls (auth.refresh,
     * resubscribes). Default 10000.
     */
    callTimeout?: number | undefined;
    /**
     * ms. Default 250.
     */
    minBackoff?: number | undefined;
    /**
     * ms; reconnect delays double from minBackoff
     * up to maxBackoff, with full jitter. A connection refused because its
     * subject has too many (-32029 to auth, close 4029) waits between
     * maxBackoff/2 and maxBackoff, and so do the attempts after it. Default 30000.
     */
    maxBackoff?: number | undefined;
    /**
     * How many times a request that the
     * server refused for a rate (LimitError with limit "requests",
     * "subject_requests" or "replay") is sent again, each time after its
     * retryAfterMs plus jitter;
     * past them the call rejects with the LimitError. The server refuses such
     * a request before handling it, so repeating it is safe for any method.
     * The client's own resubscribes after a reconnect and its unsubscribes
     * wait and repeat for as long as it takes. Default 3; 0: never.
     */
    rateLimitRetries?: number | undefined;
    /**
     * bytes the socket may hold unsent before the
     * connection is given up. Default 8 MiB.
     */
    maxBuffered?: number | undefined;
    /**
     * Called on
     * every change, and on every failed attempt (reconnecting again, with its error).
     */
    onStateChange?: ((state: State, err?: Error) => void) | undefined;
    /**
     * Default: warnings to the console.
     */
    logger?: Logger | undefined;
    /**
     * For the backoff's jitter. Default Math.random.
     */
    random?: (() => number) | undefined;
    /**
     * Returns the trace context of the request about to be sent, which goes
     * into its params._meta so that the server's spans join the caller's
     * trace: with OpenTelemetry, inject the active context into an object
     * and return it. Called for every request, the client's own too (auth,
     * auth.refresh, resubscribes); nothing, or an empty traceparent, sends
     * none. Default: none.
     */
    traceContext?: ((method: string) => (import("./trace.js").TraceContext | null | undefined)) | undefined;
};
export type CallOptions = {
    /**
     * Abandons waiting for a connection or the answer.
     */
    signal?: AbortSignal | undefined;
};
import { Transports } from './transport.js';
import { Deferred } from './deferred.js';
import { Conn } from './conn.js';
import { HttpConn } from './httpconn.js';
import { Subscription } from './subscription.js';
import { Watch } from './watch.js';
import { Backoff } from './backoff.js';
