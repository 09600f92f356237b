// The Client: a connection to the realtime API that survives disconnects.

import { Backoff } from './backoff.js';
import { Deferred, sleep } from './deferred.js';
import { codecFor } from './codec.js';
import { Conn } from './conn.js';
import { HttpConn } from './httpconn.js';
import { ClosedError, Code, ConnectionLostError, RpcError } from './errors.js';
import { isSubjectLimit, subscriptionLimit } from './limits.js';
import { Subscription } from './subscription.js';
import { Transports, WEBSOCKET_RETRY_MS } from './transport.js';
import { Watch, plannerSend } from './watch.js';

/**
 * @typedef {'connecting'|'connected'|'reconnecting'|'closed'} State
 *
 * @typedef {object} Logger
 * @property {(msg: string, attrs?: object) => void} debug
 * @property {(msg: string, attrs?: object) => void} info
 * @property {(msg: string, attrs?: object) => void} warn
 *
 * @typedef {object} ClientOptions
 * @property {(signal: AbortSignal) => (string|Promise<string>)} token
 *   Supplies an OIDC access token; called before every connection's auth
 *   and before every auth.refresh. Required.
 * @property {'msgpack'|'json'|import('./codec.js').Codec} [codec] Default "msgpack"
 *   (over the WebSocket; HTTP is always JSON).
 * @property {any} [WebSocket] The WebSocket constructor. Default globalThis.WebSocket.
 * @property {import('./transport.js').TransportMode} [transport] "websocket"
 *   or "http" (POST /rpc, streaming NDJSON) forces one. Default "auto": the
 *   WebSocket, and HTTP when its socket fails before it opens while HTTP
 *   works (a proxy that refuses WebSocket upgrades); HTTP is then kept,
 *   across reconnects, and the WebSocket is tried again only at a reconnect
 *   after websocketRetryInterval.
 * @property {number} [websocketRetryInterval] ms on HTTP after a fall back
 *   before a reconnect tries the WebSocket again. Default 300000 (5 minutes).
 * @property {typeof fetch} [fetch] For HTTP. Default globalThis.fetch.
 * @property {number} [readLimit] bytes of one line over HTTP; a longer one
 *   ends the connection. Default 8 MiB.
 * @property {() => number} [now] The clock of websocketRetryInterval. Default Date.now.
 * @property {number} [heartbeatInterval] ms between $/heartbeat; three silent
 *   intervals end the connection. Default: the server's interval, as its
 *   auth result advertises it (heartbeat_ms), or 15000 from a server that
 *   advertises none. When set and the server advertises another interval,
 *   heartbeats are sent at the shorter of the two (the server closes a
 *   connection silent for three of its intervals) and the connection is
 *   given up after three of the longer (the server sends its heartbeats only
 *   every interval of its own).
 * @property {number} [connectTimeout] ms for one attempt: open and auth. Default 10000.
 * @property {number} [callTimeout] ms for the client's own calls (auth.refresh,
 *   resubscribes). Default 10000.
 * @property {number} [minBackoff] ms. Default 250.
 * @property {number} [maxBackoff] ms; reconnect delays double from minBackoff
 *   up to maxBackoff, with full jitter. A connection refused because its
 *   subject has too many (-32029 to auth, close 4029) waits between
 *   maxBackoff/2 and maxBackoff, and so do the attempts after it. Default 30000.
 * @property {number} [rateLimitRetries] How many times a request that the
 *   server refused for a rate (LimitError with limit "requests",
 *   "subject_requests" or "replay") is sent again, each time after its
 *   retryAfterMs plus jitter;
 *   past them the call rejects with the LimitError. The server refuses such
 *   a request before handling it, so repeating it is safe for any method.
 *   The client's own resubscribes after a reconnect and its unsubscribes
 *   wait and repeat for as long as it takes. Default 3; 0: never.
 * @property {number} [maxBuffered] bytes the socket may hold unsent before the
 *   connection is given up. Default 8 MiB.
 * @property {(state: State, err?: Error) => void} [onStateChange] Called on
 *   every change, and on every failed attempt (reconnecting again, with its error).
 * @property {Logger} [logger] Default: warnings to the console.
 * @property {() => number} [random] For the backoff's jitter. Default Math.random.
 * @property {(method: string) => (import('./trace.js').TraceContext|null|undefined)} [traceContext]
 *   Returns the trace context of the request about to be sent, which goes
 *   into its params._meta so that the server's spans join the caller's
 *   trace: with OpenTelemetry, inject the active context into an object
 *   and return it. Called for every request, the client's own too (auth,
 *   auth.refresh, resubscribes); nothing, or an empty traceparent, sends
 *   none. Default: none.
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] Abandons waiting for a connection or the answer.
 */

const quietLogger = Object.freeze({
  debug() {},
  info() {},
  /** @param {string} msg @param {object} [attrs] */
  warn(msg, attrs) { console.warn(`ballet client: ${msg}`, attrs ?? ''); },
});

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
  constructor(url, options) {
    if (!options || typeof options.token !== 'function') throw new TypeError('ballet client: options.token is required');
    this.url = url;
    const WS = options.WebSocket ?? globalThis.WebSocket;
    let mode = options.transport ?? 'auto';
    if (!WS && mode === 'auto') mode = 'http';
    if (!WS && mode === 'websocket') throw new TypeError('ballet client: no WebSocket implementation: pass options.WebSocket');
    const fetchFn = options.fetch ?? globalThis.fetch?.bind(globalThis);
    if (!fetchFn && mode !== 'websocket') throw new TypeError('ballet client: no fetch implementation: pass options.fetch');
    const minBackoff = options.minBackoff ?? 250;
    /** Which transport each connection uses. */
    this._transports = new Transports(mode, options.websocketRetryInterval ?? WEBSOCKET_RETRY_MS, options.now ?? Date.now);
    this.o = {
      token: options.token,
      codec: codecFor(options.codec),
      WebSocket: WS,
      fetch: fetchFn,
      readLimit: options.readLimit ?? 8 << 20,
      heartbeatInterval: options.heartbeatInterval ?? 0,
      connectTimeout: options.connectTimeout ?? 10000,
      callTimeout: options.callTimeout ?? 10000,
      minBackoff,
      maxBackoff: Math.max(minBackoff, options.maxBackoff ?? 30000),
      maxBuffered: options.maxBuffered ?? 8 << 20,
      rateLimitRetries: Math.max(0, options.rateLimitRetries ?? 3),
      onStateChange: options.onStateChange ?? (() => {}),
      logger: options.logger ?? quietLogger,
      random: options.random ?? Math.random,
      traceContext: options.traceContext,
    };
    this.log = this.o.logger;
    /** @type {State} */
    this._state = 'connecting';
    this._started = false;
    this._everConnected = false;
    this._closed = false;
    /** @type {Deferred<void>} resolved by close() */
    this._closing = new Deferred();
    /** @type {Conn|HttpConn|null} */
    this._cur = null;
    /** @type {Deferred<Conn|HttpConn>} resolved when the next connection is current */
    this._ready = new Deferred();
    this._gen = 0;
    this._subject = '';
    /** @type {Conn|HttpConn|null} the connection whose limits are known */
    this._limitsConn = null;
    /** @type {Map<string, Subscription|Watch>} subscriptions and watches, in creation order */
    this._subs = new Map();
    this._nextID = 0;
    this._restoring = false;
    this._again = false;
    this._backoff = new Backoff(this.o.minBackoff, this.o.maxBackoff, this.o.random);
  }

  /** The connection state. */
  get state() { return this._state; }

  /** The authenticated subject (from the auth result), or "" before the first connection. */
  get subject() { return this._subject; }

  /**
   * The limits the server advertised on the current (or the last)
   * connection, with the wire's names (subscriptions, requests_per_second,
   * message_bytes, replay, connections_per_subject, heartbeat_ms); null
   * before the first connection and from a server that advertises none
   * (an older one: nothing is enforced locally then).
   * @returns {import('./limits.js').Limits|null}
   */
  get limits() { return this._limitsConn?.limits ?? null; }

  /** Whether close() was called. */
  get closed() { return this._closed; }

  /**
   * The transport of the current connection: "websocket", "http", or null
   * while there is none.
   * @returns {import('./transport.js').Transport|null}
   */
  get transport() { return this._cur?.transport ?? null; }

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
  async connect(opts = {}) {
    if (this._started) throw new Error('ballet client: connect called twice');
    this._started = true;
    this._setState('connecting');
    let cn;
    if (opts.retry) {
      cn = await this._attempts();
      if (!cn) throw new ClosedError();
    } else {
      try {
        cn = await this._connect(++this._gen);
      } catch (err) {
        this._closed = true;
        this._setState('closed', /** @type {Error} */ (err));
        throw err;
      }
      if (!this._setCurrent(cn)) throw new ClosedError();
    }
    void this._run(cn);
  }

  /**
   * close ends the connection with a normal closure, stops reconnecting and
   * ends every subscription with ClosedError. It is safe to call twice.
   * @returns {Promise<void>} resolves when the socket has closed (or after a short grace)
   */
  async close() {
    if (this._closed) return;
    this._closed = true;
    const cur = this._cur;
    this._cur = null;
    this._closing.resolve();
    this._ready.reject(new ClosedError());
    const subs = [...this._subs.values()];
    this._subs.clear();
    for (const s of subs) s._end(new ClosedError());
    this._setState('closed');
    if (cur) await cur.closeNormal();
  }

  /**
   * dropConnection ends the current connection abruptly, as a network
   * failure would; the client reconnects and resumes its subscriptions.
   * For tests and debugging.
   */
  dropConnection() {
    this._cur?.die(new ConnectionLostError('connection dropped by the application'), 4000);
  }

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
  async call(method, params = {}, opts = {}) {
    const cn = await this._waitConn(opts.signal);
    try {
      return await cn.request(method, params, { signal: opts.signal, retries: this.o.rateLimitRetries });
    } catch (err) {
      if (err instanceof ConnectionLostError && this._closed) throw new ClosedError();
      throw err;
    }
  }

  /**
   * notify sends a notification, waiting for a connection like call.
   * @param {string} method @param {object} [params] @param {CallOptions} [opts]
   */
  async notify(method, params = {}, opts = {}) {
    const cn = await this._waitConn(opts.signal);
    cn.notify(method, params);
  }

  /**
   * ping checks the connection end to end (system.ping).
   * @param {CallOptions} [opts]
   * @returns {Promise<import('./wire.js').PingResult>}
   */
  ping(opts) {
    return this.call('system.ping', {}, opts);
  }

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
  async subscribe(stream, opts = {}) {
    const s = new Subscription(this, this._newID(), stream, opts);
    return /** @type {Promise<Subscription>} */ (this._first(s, opts.signal, `subscribe ${stream}`));
  }

  /**
   * unsubscribe ends the stream subscription or planner watch with this id
   * (stream.unsubscribe). An id the client does not know rejects with
   * RpcError NotFound.
   * @param {string} id
   * @param {CallOptions} [opts]
   */
  async unsubscribe(id, opts = {}) {
    const e = this._subs.get(id);
    if (!e) throw new RpcError(Code.NotFound, `subscription "${id}" not found`);
    this._subs.delete(id);
    const gen = e._end(null);
    const cn = this._cur;
    if (!gen || !cn || cn.gen !== gen) return; // the server no longer has it
    try {
      // Forgotten here: a refusal for the rate is sent again until the
      // signal aborts, or the server would keep counting it.
      await cn.request('stream.unsubscribe', { subscription: id }, { signal: opts.signal, retries: Infinity });
    } catch (err) {
      if (err instanceof RpcError && err.code !== Code.NotFound) throw err;
      if (opts.signal?.aborted) throw err;
      // Not found, or the connection (and the subscription with it) is gone.
    }
  }

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
  async plannerWatch(session, opts = {}) {
    const w = new Watch(this, this._newID(), session, opts);
    return /** @type {Promise<Watch>} */ (this._first(w, opts.signal, `planner.watch ${session}`));
  }

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
  plannerSend(session, text, opts) {
    return plannerSend(this, session, text, opts);
  }

  /**
   * plannerCancel stops the session's running turn, if any (planner.cancel).
   * @param {string} session @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async plannerCancel(session, opts) {
    await this.call('planner.cancel', { session }, opts);
  }

  /**
   * presenceGet asks who is present on a stream now, on every replica
   * (presence.get, an extension; needs tracker.read).
   * @param {string} stream @param {CallOptions} [opts]
   * @returns {Promise<import('./wire.js').PresenceGetResult>}
   */
  presenceGet(stream, opts) {
    return this.call('presence.get', { stream }, opts);
  }

  /**
   * presenceGetItems is presenceGet of a project (project:<KEY>) that also
   * answers who has each of its items open (items, items_truncated).
   * @param {string} stream
   * @param {CallOptions} [opts]
   * @returns {Promise<import('./wire.js').PresenceGetResult & {items: import('./wire.js').ItemMembers[], items_truncated: boolean}>}
   */
  presenceGetItems(stream, opts) {
    return this.call('presence.get', { stream, items: true }, opts);
  }

  // ---- internals ----

  /** @param {State} state @param {Error} [err] */
  _setState(state, err) {
    if (this._state === 'closed' && state !== 'closed') return;
    if (this._state === 'closed' && this._stateReported) return;
    if (state === 'closed') this._stateReported = true;
    this._state = state;
    try {
      this.o.onStateChange(state, err);
    } catch (e) {
      this.log.warn('onStateChange failed', { err: String(e) });
    }
  }

  _newID() {
    return `s${++this._nextID}`;
  }

  /**
   * @param {Subscription|Watch} e @param {AbortSignal|undefined} signal @param {string} what
   */
  async _first(e, signal, what) {
    if (this._closed) throw new ClosedError();
    const refused = subscriptionLimit(this.limits, this._subs.size);
    if (refused) {
      refused.message = `${what}: ${refused.message}`;
      throw refused;
    }
    this._subs.set(e.id, e);
    try {
      await e._first(signal);
      return e;
    } catch (err) {
      e.onEnd = undefined; // the caller learns of it from the rejection
      e._fail(/** @type {Error} */ (err));
      if (this._closed) throw new ClosedError();
      if (err instanceof Error) err.message = `${what}: ${err.message}`;
      throw err;
    }
  }

  /**
   * _connect opens and authenticates connection gen over the transport
   * the client is on, and over HTTP when a WebSocket fails before it opens
   * (transport "auto").
   * @param {number} gen
   * @returns {Promise<Conn|HttpConn>}
   */
  async _connect(gen) {
    const signal = AbortSignal.timeout(this.o.connectTimeout);
    const token = async (/** @type {AbortSignal} */ s) => {
      const t = await this.o.token(s);
      if (typeof t !== 'string' || t === '') throw new Error('the token function returned no token');
      return t;
    };
    const tok = await token(signal);
    const first = this._transports.next();
    const cn = this._newConn(first, gen);
    try {
      await this._handshake(cn, tok, token);
    } catch (err) {
      if (!(cn instanceof Conn) || cn.wasOpen || !this._transports.canFallBack || this._closed) throw err;
      this.log.info('the WebSocket did not open: trying HTTP', { err: String(err) });
      const hc = this._newConn('http', gen);
      await this._handshake(hc, tok, token);
      this.log.warn('the WebSocket did not open: on HTTP (POST /rpc) from now on', {
        err: String(err), retryWebSocketAfterMs: this._transports.retryMs,
      });
      this._transports.fellBack();
      return hc;
    }
    if (cn.transport === 'websocket') this._transports.webSocketWorks();
    return cn;
  }

  /**
   * @param {import('./transport.js').Transport} transport @param {number} gen
   * @returns {Conn|HttpConn}
   */
  _newConn(transport, gen) {
    const o = {
      url: this.url, gen, codec: this.o.codec, WebSocket: this.o.WebSocket,
      heartbeatInterval: this.o.heartbeatInterval, maxBuffered: this.o.maxBuffered,
      rateLimitRetries: this.o.rateLimitRetries, traceContext: this.o.traceContext,
      onNotification: (/** @type {any} */ c, /** @type {string} */ method, /** @type {any} */ params) => this._route(c, method, params),
      onEnd: (/** @type {any} */ c) => this._lost(c),
      logger: this.log,
    };
    if (transport === 'http') return new HttpConn({ ...o, fetch: this.o.fetch, readLimit: this.o.readLimit });
    return new Conn(o);
  }

  /**
   * _handshake authenticates cn with tok and starts it; cn dies when it fails.
   * @param {Conn|HttpConn} cn @param {string} tok
   * @param {(signal: AbortSignal) => Promise<string>} token
   */
  async _handshake(cn, tok, token) {
    const sent = Date.now();
    try {
      const res = await cn.handshake(tok, this.o.connectTimeout);
      cn.start(sent, res.expires_at, token, this.o.callTimeout);
    } catch (err) {
      cn.die(/** @type {Error} */ (err), 1000);
      throw err;
    }
  }

  /** @param {Conn|HttpConn} cn @returns {boolean} false when the client closed meanwhile */
  _setCurrent(cn) {
    if (this._closed) {
      void cn.closeNormal();
      return false;
    }
    this._cur = cn;
    this._limitsConn = cn;
    this._everConnected = true;
    this._subject = cn.subject;
    this._ready.resolve(cn);
    this._setState('connected');
    return true;
  }

  /**
   * _lost forgets cn as the current connection the moment it ends, so that
   * calls wait for the next one.
   * @param {Conn|HttpConn} cn
   */
  _lost(cn) {
    if (this._cur !== cn || this._closed) return;
    this._cur = null;
    this._ready = new Deferred();
    this.log.info('connection lost: reconnecting', { err: String(cn.error) });
    this._setState('reconnecting', cn.error ?? undefined);
  }

  /**
   * _run serves connections: when one ends, it reconnects.
   * @param {Conn|HttpConn} cn
   */
  async _run(cn) {
    for (;;) {
      const since = Date.now();
      this._kick();
      const err = await Promise.race([cn.ended, this._closing.promise.then(() => null)]);
      if (this._closed || !err) return;
      if (Date.now() - since >= this.o.maxBackoff) {
        // The connection was stable: start again from minBackoff. A server
        // that drops every connection at once sees the delays keep growing.
        this._backoff.reset();
      }
      const next = await this._attempts(err);
      if (!next) return;
      cn = next;
    }
  }

  /**
   * _attempts connects with backoff until it succeeds or the client closes,
   * after cause ended the last connection. The first try of a fresh client
   * is immediate.
   * @param {Error} [cause]
   * @returns {Promise<Conn|HttpConn|null>}
   */
  async _attempts(cause) {
    let first = this._gen === 0;
    for (;;) {
      if (!first && !(await sleep(this._delay(cause), this._closing.promise))) return null;
      first = false;
      if (this._closed) return null;
      let cn;
      try {
        cn = await this._connect(++this._gen);
      } catch (err) {
        if (this._closed) return null;
        this.log.info('connect failed', { err: String(err) });
        this._setState(this._everConnected ? 'reconnecting' : 'connecting', /** @type {Error} */ (err));
        cause = /** @type {Error} */ (err);
        continue;
      }
      return this._setCurrent(cn) ? cn : null;
    }
  }

  /**
   * _delay is the wait before the next attempt after cause. A subject at
   * its connection limit waits near maxBackoff, since other connections
   * must end first. (Browsers do not show why a handshake failed, so a full
   * replica's 503 is an ordinary failure here.)
   * @param {Error} [cause]
   */
  _delay(cause) {
    if (!isSubjectLimit(cause)) return this._backoff.next();
    const d = this._backoff.atCeiling();
    this.log.warn('too many connections of this subject: backing off', { err: String(cause), delayMs: d });
    return d;
  }

  /**
   * _waitConn returns the current connection, waiting while the client
   * reconnects.
   * @param {AbortSignal} [signal]
   * @returns {Promise<Conn|HttpConn>}
   */
  async _waitConn(signal) {
    for (;;) {
      if (this._closed) throw new ClosedError();
      if (this._cur && !this._cur.error) return this._cur;
      const ready = this._ready.promise;
      if (!signal) {
        await ready;
        continue;
      }
      if (signal.aborted) throw signal.reason;
      await new Promise((resolve, reject) => {
        const onAbort = () => reject(signal.reason);
        signal.addEventListener('abort', onAbort, { once: true });
        const settle = () => signal.removeEventListener('abort', onAbort);
        ready.then((v) => { settle(); resolve(v); }, (e) => { settle(); reject(e); });
      });
    }
  }

  /** _kick runs restoreAll on the current connection, one run at a time. */
  _kick() {
    if (this._restoring) {
      this._again = true;
      return;
    }
    this._restoring = true;
    void (async () => {
      try {
        do {
          this._again = false;
          const cn = this._cur;
          if (cn && !cn.error) await this._restoreAll(cn);
        } while (this._again && !this._closed);
      } finally {
        this._restoring = false;
      }
    })();
  }

  /**
   * _restoreAll subscribes again every entry not subscribed on cn, in the
   * order they were created.
   * @param {Conn|HttpConn} cn
   */
  async _restoreAll(cn) {
    for (const e of [...this._subs.values()]) {
      if (!e._needsRestore(cn.gen)) continue;
      if (!(await e._restore(cn))) return; // the connection is gone; the next one restores the rest
    }
  }

  /**
   * _route serves the notifications the server sends on cn, in order.
   * @param {Conn|HttpConn} cn @param {string} method @param {any} params
   */
  _route(cn, method, params) {
    if (cn !== this._cur || !params || typeof params !== 'object') return;
    switch (method) {
      case 'stream.event': {
        const s = this._subs.get(params.subscription);
        if (s instanceof Subscription) s._deliver(params);
        return;
      }
      case 'planner.output': {
        const w = this._subs.get(params.subscription);
        if (w instanceof Watch) w._deliver(params, cn.gen);
        return;
      }
      case 'presence.changed': {
        const s = this._subs.get(params.subscription);
        if (s instanceof Subscription) s._presenceChanged(params);
        return;
      }
      case 'stream.closed': {
        const e = this._subs.get(params.subscription);
        e?._serverClosed(cn.gen, String(params.reason));
        return;
      }
      default: // $/heartbeat, and notifications this client does not know
    }
  }
}

/**
 * dial creates a Client and makes its first connection (see
 * Client.connect).
 * @param {string} url
 * @param {ClientOptions} options
 * @param {{retry?: boolean}} [connectOptions]
 * @returns {Promise<Client>}
 */
export async function dial(url, options, connectOptions) {
  const c = new Client(url, options);
  await c.connect(connectOptions);
  return c;
}
