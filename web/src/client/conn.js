// One connection: JSON-RPC ids and pending calls, in-order notifications,
// heartbeats and token refresh. Link is what every transport shares; Conn is
// a WebSocket (HttpConn, in httpconn.js, emulates one over POST /rpc). The
// Client owns connections and replaces them when they end.

import {
  ClosedError, Code, CloseCode, ConnectionLostError, ConnectTimeoutError, FrameError,
  HeartbeatTimeoutError, LimitError, SocketClosedError, SubprotocolError, rpcError,
} from './errors.js';
import { heartbeats, isRate, retryWait } from './limits.js';
import { withTraceContext } from './trace.js';

/** @typedef {import('./limits.js').Limits} Limits */

/** The shortest wait between two auth.refresh attempts. */
export const MIN_REFRESH_MS = 1000;
/** How long a normal close waits for the server's close frame. */
const CLOSE_GRACE_MS = 1000;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * refreshDelay is the wait until 80 % of the span from issued to exp
 * (Unix milliseconds) has passed, and at least MIN_REFRESH_MS.
 * @param {number} issued @param {number} exp @param {number} now
 */
export function refreshDelay(issued, exp, now) {
  const at = issued + (exp - issued) * 0.8;
  return Math.min(Math.max(at - now, MIN_REFRESH_MS), MAX_TIMER_MS);
}

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
  constructor(o) {
    this.o = o;
    this.gen = o.gen;
    this.codec = o.codec;
    /** @type {Map<number, {resolve: (v: any) => void, reject: (e: any) => void}>} */
    this.pending = new Map();
    this.nextId = 1;
    this.subject = '';
    /** @type {Error|null} why the connection ended, once it has */
    this.error = null;
    this.lastRecv = Date.now();
    this.lastSent = Date.now();
    this.started = false; // heartbeats run (after auth)
    /** @type {Limits|null} what the auth (or the last auth.refresh) result advertised */
    this.limits = null;
    [this.beat, this.silence] = heartbeats(o.heartbeatInterval, 0);
    /** @type {any[]} */
    this.timers = [];
    /** @type {any} */
    this.refreshTimer = null;
    /** @type {(err: Error) => void} */
    let endResolve = () => {};
    /** @type {Promise<Error>} resolves with the reason when the connection ends */
    this.ended = new Promise((r) => { endResolve = r; });
    this.endResolve = endResolve;
  }

  /**
   * watching says whether silence now means a dead connection: always on a
   * socket; over HTTP only while a response is open.
   * @returns {boolean}
   */
  get watching() { return true; }

  /** sendsHeartbeats says whether the client sends $/heartbeat (not over HTTP). */
  get sendsHeartbeats() { return true; }

  /**
   * transmit sends one message; it throws when the connection has ended.
   * @param {object} msg @returns {void}
   */
  transmit(msg) { void msg; throw new Error('not implemented'); }

  /**
   * die ends the connection at once for err (the first reason wins) and
   * releases what carries it, closing a socket with code.
   * @param {Error} err @param {number} code @returns {void}
   */
  die(err, code) { void code; this.end(err); }

  /**
   * start begins heartbeats and token refresh once auth succeeded.
   * @param {number} issued Unix ms when auth was sent
   * @param {number} expiresAt Unix seconds from the auth result
   * @param {(signal: AbortSignal) => Promise<string>} token
   * @param {number} callTimeout ms for auth.refresh
   */
  start(issued, expiresAt, token, callTimeout) {
    if (this.error) return;
    const iv = this.beat;
    this.lastSent = Date.now();
    this.started = true;
    const tick = setInterval(() => this.keepalive(), Math.max(Math.floor(iv / 4), 1));
    this.timers.push(tick);
    // A token without exp (over HTTP, where expiry is read from the token) is not refreshed.
    if (expiresAt > 0) this.scheduleRefresh(issued, expiresAt * 1000, token, callTimeout);
  }

  keepalive() {
    if (this.error) return;
    const iv = this.beat;
    const now = Date.now();
    if (this.watching && now - this.lastRecv >= 3 * this.silence) {
      this.o.logger.info('heartbeat timeout: reconnecting', { silentMs: now - this.lastRecv });
      this.die(new HeartbeatTimeoutError(), CloseCode.HeartbeatTimeout);
      return;
    }
    if (this.sendsHeartbeats && now - this.lastSent >= iv) {
      this.lastSent = now;
      this.notify('$/heartbeat', { time: now });
    }
  }

  /**
   * @param {number} issued @param {number} exp Unix ms
   * @param {(signal: AbortSignal) => Promise<string>} token
   * @param {number} callTimeout
   */
  scheduleRefresh(issued, exp, token, callTimeout) {
    if (this.error) return;
    this.refreshTimer = setTimeout(async () => {
      const sent = Date.now();
      try {
        const signal = AbortSignal.timeout(callTimeout);
        const tok = await token(signal);
        /** @type {{expires_at: number, limits?: Limits}} */
        const res = await this.request('auth.refresh', { token: tok }, { signal, retries: this.o.rateLimitRetries });
        if (res.limits) this.setLimits(res.limits);
        issued = sent;
        exp = res.expires_at * 1000;
      } catch (err) {
        if (this.error) return;
        // Try again before expiry; if every attempt fails, the server
        // closes with 4001 and the client reconnects with a new token.
        this.o.logger.warn('auth.refresh failed', { err: String(err), expiresAt: new Date(exp).toISOString() });
        issued = sent;
      }
      this.scheduleRefresh(issued, exp, token, callTimeout);
    }, refreshDelay(issued, exp, Date.now()));
  }

  /** @param {unknown} limits the auth result's, when it is an object */
  setLimits(limits) {
    if (limits && typeof limits === 'object' && !Array.isArray(limits)) this.limits = Object.freeze({ ...limits });
  }

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
  async request(method, params, { signal, retries = 0, timeout } = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.call(method, params, timeout ? AbortSignal.timeout(timeout) : signal);
      } catch (err) {
        if (!(err instanceof LimitError) || !isRate(err.limit) || attempt >= retries) throw err;
        const wait = retryWait(err.retryAfterMs, attempt);
        this.o.logger.debug('request rate limit: waiting', { method, waitMs: wait });
        await this.pause(wait, signal);
      }
    }
  }

  /**
   * pause waits ms; it rejects with the signal's reason when it is aborted
   * and with ConnectionLostError when the connection ends first.
   * @param {number} ms @param {AbortSignal} [signal]
   * @returns {Promise<void>}
   */
  pause(ms, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      /** @type {() => void} */
      let onAbort = () => {};
      const t = setTimeout(() => { settle(); resolve(); }, ms);
      const settle = () => {
        clearTimeout(t);
        signal?.removeEventListener('abort', onAbort);
      };
      onAbort = () => { settle(); reject(signal?.reason); };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.ended.then(() => { settle(); reject(this.lostError()); });
    });
  }

  /**
   * call sends a request and resolves with its result; a connection that
   * ends first rejects with ConnectionLostError, an error reply with
   * RpcError (LimitError for -32029), an aborted signal with its reason.
   * @param {string} method
   * @param {any} params
   * @param {AbortSignal} [signal]
   * @returns {Promise<any>}
   */
  call(method, params, signal) {
    return new Promise((resolve, reject) => {
      if (this.error) {
        reject(this.lostError());
        return;
      }
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const id = this.nextId++;
      /** @type {() => void} */
      let onAbort = () => {};
      const done = () => {
        this.pending.delete(id);
        signal?.removeEventListener('abort', onAbort);
      };
      this.pending.set(id, {
        resolve: (v) => { done(); resolve(v); },
        reject: (e) => { done(); reject(e); },
      });
      onAbort = () => { done(); reject(signal?.reason); };
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        this.transmit({ jsonrpc: '2.0', id, method, params: withTraceContext(this.o.traceContext, method, params ?? {}, this.o.logger) });
      } catch (err) {
        done();
        reject(err);
      }
    });
  }

  /**
   * notify sends a notification; it throws when the connection has ended.
   * @param {string} method @param {any} params
   */
  notify(method, params) {
    if (this.error) throw this.lostError();
    this.transmit({ jsonrpc: '2.0', method, params: params ?? {} });
  }

  lostError() {
    if (this.error instanceof ClosedError) return this.error;
    return new ConnectionLostError(`connection lost: ${this.error?.message ?? 'not connected'}`, this.error);
  }

  /**
   * dispatch serves one message that arrived: a notification to
   * onNotification, an answer to its pending call.
   * @param {any} msg
   */
  dispatch(msg) {
    if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
      this.o.logger.warn('ignored a message that is not an object');
      return;
    }
    if (typeof msg.method === 'string') {
      if (msg.id === undefined || msg.id === null) {
        try {
          this.o.onNotification(this, msg.method, msg.params);
        } catch (err) {
          this.o.logger.warn('notification handler failed', { method: msg.method, err: String(err) });
        }
        return;
      }
      // The server may send requests too; the client serves none.
      this.refuseRequest(msg.id, msg.method);
      return;
    }
    const p = typeof msg.id === 'number' ? this.pending.get(msg.id) : undefined;
    if (!p) {
      if (msg.error) this.o.logger.warn('error from the server', { code: msg.error.code, message: msg.error.message });
      return;
    }
    if (msg.error) {
      p.reject(rpcError(Number(msg.error.code), String(msg.error.message ?? ''), msg.error.data));
    } else {
      p.resolve(msg.result);
    }
  }


  /**
   * refuseRequest answers a request from the server with -32601 where it can.
   * @param {unknown} id @param {string} method
   */
  refuseRequest(id, method) { void id; void method; }

  /** @param {Error} err */
  end(err) {
    if (this.error) return;
    this.error = err;
    for (const t of this.timers) clearInterval(t);
    clearTimeout(this.refreshTimer);
    const lost = this.lostError();
    for (const p of [...this.pending.values()]) p.reject(lost);
    this.pending.clear();
    try {
      this.o.onEnd(this);
    } finally {
      this.endResolve(err);
    }
  }
}

/** Conn is one authenticated (or authenticating) WebSocket. */
export class Conn extends Link {
  /** @param {ConnOptions} o */
  constructor(o) {
    super(o);
    /** @type {'websocket'} */
    this.transport = 'websocket';
    /** Whether the socket opened: one that never did may be refused by a proxy. */
    this.wasOpen = false;
    const ws = new o.WebSocket(o.url, [o.codec.name]);
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    /** @type {(err: Error) => void} */
    this.openReject = () => {};
    /** @type {Promise<void>} resolves when the socket is open */
    this.opened = new Promise((resolve, reject) => {
      ws.onopen = () => {
        this.wasOpen = true;
        resolve();
      };
      this.openReject = reject;
    });
    this.opened.catch(() => {});
    ws.onmessage = (/** @type {MessageEvent} */ ev) => this.receive(ev.data);
    ws.onerror = () => {}; // the close event follows and says more
    ws.onclose = (/** @type {CloseEvent} */ ev) => this.end(new SocketClosedError(ev.code, ev.reason));
  }

  /**
   * handshake opens the socket, checks the subprotocol and authenticates
   * with token, within timeoutMs. It returns the auth result.
   * @param {string} token
   * @param {number} timeoutMs
   * @returns {Promise<import('./wire.js').AuthResult>}
   */
  async handshake(token, timeoutMs) {
    const timer = setTimeout(() => this.die(new ConnectTimeoutError(), CloseCode.Normal), timeoutMs);
    try {
      await Promise.race([this.opened, this.ended.then((e) => { throw e; })]);
      if (this.ws.protocol !== this.codec.name) {
        this.die(new SubprotocolError(this.codec.name), CloseCode.PolicyViolation);
        throw this.error;
      }
      /** @type {{subject: string, expires_at: number, limits?: Limits}} */
      const res = await this.call('auth', { token });
      this.subject = res.subject;
      this.setLimits(res.limits);
      [this.beat, this.silence] = heartbeats(this.o.heartbeatInterval, this.limits?.heartbeat_ms);
      return res;
    } finally {
      clearTimeout(timer);
    }
  }

  /** @param {object} msg */
  transmit(msg) {
    this.send(msg);
  }

  /** @param {object} msg */
  send(msg) {
    if (this.ws.bufferedAmount > this.o.maxBuffered) {
      // The peer stopped reading; nothing sent now would arrive in time.
      this.die(new ConnectionLostError('send buffer full'), CloseCode.Normal);
      throw this.lostError();
    }
    try {
      this.ws.send(this.codec.encode(msg));
    } catch (err) {
      this.die(new ConnectionLostError('send failed', err), CloseCode.Normal);
      throw this.lostError();
    }
  }

  /** @param {any} data */
  receive(data) {
    if (this.error) return;
    this.lastRecv = Date.now();
    if (this.started && this.lastRecv - this.lastSent >= this.beat) {
      // Browsers throttle timers in background tabs, never message events:
      // answering here keeps the server from timing the connection out.
      this.lastSent = this.lastRecv;
      try {
        this.notify('$/heartbeat', { time: this.lastRecv });
      } catch {
        return; // the connection ended
      }
    }
    const binary = typeof data !== 'string';
    if (binary !== this.codec.binary) {
      this.die(new FrameError(`a ${binary ? 'binary' : 'text'} frame on ${this.codec.name}`), CloseCode.UnsupportedData);
      return;
    }
    let msg;
    try {
      msg = this.codec.decode(data);
    } catch (err) {
      this.die(new FrameError(`undecodable frame: ${/** @type {Error} */ (err).message}`), CloseCode.UnsupportedData);
      return;
    }
    this.dispatch(msg);
  }

  /** @param {unknown} id @param {string} method */
  refuseRequest(id, method) {
    try {
      this.send({ jsonrpc: '2.0', id, error: { code: Code.MethodNotFound, message: `method ${method} not found` } });
    } catch { /* the connection is gone */ }
  }

  /**
   * die ends the connection at once for err (the first reason wins) and
   * closes the socket with code.
   * @param {Error} err @param {number} code
   */
  die(err, code) {
    if (this.error) return;
    this.end(err);
    try {
      this.ws.close(code, err.message.slice(0, 120));
    } catch {
      this.ws.close();
    }
  }

  /** closeNormal closes with 1000 and resolves when the socket has closed, or after a grace period. */
  closeNormal() {
    const ws = this.ws;
    const closed = new Promise((resolve) => {
      if (ws.readyState === 3) {
        resolve(undefined);
        return;
      }
      const t = setTimeout(resolve, CLOSE_GRACE_MS);
      const prev = ws.onclose;
      ws.onclose = (/** @type {any} */ ev) => {
        clearTimeout(t);
        prev?.(ev);
        resolve(undefined);
      };
    });
    this.die(new ClosedError(), CloseCode.Normal);
    return closed;
  }


  /** @param {Error} err */
  end(err) {
    if (this.error) return;
    this.openReject(err);
    super.end(err);
  }
}
