// Which transport the next connection uses: the WebSocket, or POST /rpc
// (streaming HTTP) where a proxy refuses WebSocket upgrades.

/** How long the client stays on HTTP before it tries the WebSocket again: five minutes. */
export const WEBSOCKET_RETRY_MS = 5 * 60 * 1000;

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
  constructor(mode, retryMs, now) {
    if (mode !== 'auto' && mode !== 'websocket' && mode !== 'http') {
      throw new TypeError(`ballet client: unknown transport ${String(mode)}: want "auto", "websocket" or "http"`);
    }
    this.mode = mode;
    this.retryMs = retryMs;
    this.now = now;
    /** When the client fell back to HTTP; null while it is on the WebSocket. */
    this.since = /** @type {number|null} */ (null);
  }

  /**
   * next is the transport of the next attempt.
   * @returns {Transport}
   */
  next() {
    if (this.mode !== 'auto') return this.mode;
    if (this.since === null || this.now() - this.since >= this.retryMs) return 'websocket';
    return 'http';
  }

  /** canFallBack says whether a WebSocket that never opened is followed by an HTTP attempt. */
  get canFallBack() {
    return this.mode === 'auto';
  }

  /**
   * fellBack records that a WebSocket failed before it opened and HTTP
   * worked: the wait before the WebSocket is tried again starts now.
   */
  fellBack() {
    if (this.mode === 'auto') this.since = this.now();
  }

  /** webSocketWorks records a connection made over the WebSocket: the fall back is over. */
  webSocketWorks() {
    this.since = null;
  }
}
