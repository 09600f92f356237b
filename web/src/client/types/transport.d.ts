/** How long the client stays on HTTP before it tries the WebSocket again: five minutes. */
export const WEBSOCKET_RETRY_MS: number;
/**
 * @typedef {'auto'|'websocket'|'http'} TransportMode
 * @typedef {'websocket'|'http'} Transport
 */
/**
 * Transports decides the transport of each connection. A forced mode is
 * always that transport. In 'auto' the WebSocket comes first; when its
 * socket fails before it opens and HTTP works, the client falls back to
 * HTTP and keeps it, reconnects included, instead of trying the WebSocket
 * at each one. Only a reconnect that happens anyway after retryMs tries the
 * WebSocket again; when it fails before opening once more, HTTP is kept
 * for another retryMs.
 */
export class Transports {
    /**
     * @param {TransportMode} mode
     * @param {number} retryMs
     * @param {() => number} now
     */
    constructor(mode: TransportMode, retryMs: number, now: () => number);
    mode: TransportMode;
    retryMs: number;
    now: () => number;
    /** When the client fell back to HTTP; null while it is on the WebSocket. */
    since: number | null;
    /**
     * next is the transport of the next attempt.
     * @returns {Transport}
     */
    next(): Transport;
    /** canFallBack says whether a WebSocket that never opened is followed by an HTTP attempt. */
    get canFallBack(): boolean;
    /**
     * fellBack records that a WebSocket failed before it opened and HTTP
     * worked: the wait before the WebSocket is tried again starts now.
     */
    fellBack(): void;
    /** webSocketWorks records a connection made over the WebSocket: the fall back is over. */
    webSocketWorks(): void;
}
export type TransportMode = "auto" | "websocket" | "http";
export type Transport = "websocket" | "http";
