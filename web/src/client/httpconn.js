// A connection emulated over POST /rpc (JSON-RPC over streaming HTTP,
// NDJSON), for networks whose proxies refuse WebSocket upgrades: each
// request is one POST that carries the current token; a subscription's
// response stays open and its lines are dispatched in order. To the Client
// it is one connection, with the WebSocket Conn's interface: it ends as a
// whole, as a socket would, and the Client's reconnect path resumes every
// subscription on the next one.

import { json } from './codec.js';
import { Link } from './conn.js';
import { heartbeats } from './limits.js';
import {
  ClosedError, Code, CloseCode, ConnectTimeoutError, ConnectionLostError, FrameError, Limit, RpcError,
  SocketClosedError,
} from './errors.js';

/** The methods whose response stays open: their notifications follow the result. */
const OPEN_METHODS = new Set(['stream.subscribe', 'planner.watch']);

/** The header with the server's heartbeat interval, in ms (limits' heartbeat_ms on a socket). */
const HEARTBEAT_HEADER = 'Ballet-Heartbeat-Ms';

/** The most of a refusal's body (RFC 7807 problem) read for its message. */
const PROBLEM_BYTES = 4096;

/**
 * httpURL is the http(s) URL of a ws(s) URL (and an http(s) URL itself).
 * @param {string} url
 */
export function httpURL(url) {
  return url.replace(/^ws(s?):/i, 'http$1:');
}

/**
 * tokenExpiry is the exp claim (Unix seconds) of a JWT, read without
 * checking it (the server checks it), or 0 when it has none.
 * @param {string} token
 */
export function tokenExpiry(token) {
  try {
    const part = token.split('.')[1] ?? '';
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '=');
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))));
    return typeof claims.exp === 'number' ? claims.exp : 0;
  } catch {
    return 0;
  }
}

/**
 * @typedef {object} Exchange one POST and its response
 * @property {AbortController} ctl aborts its fetch
 * @property {number|undefined} id the request's id; undefined for a notification
 * @property {string} sub the subscription it opens, or ""
 * @property {boolean} done its last line came: the body may end now
 * @property {boolean} open its result came and its response stays open
 * @property {boolean} closed its fetch was ended by the client (unsubscribe)
 */

/** HttpConn is a connection emulated over POST /rpc: see the file's comment. */
export class HttpConn extends Link {
  /** @param {import('./conn.js').ConnOptions & {fetch: typeof fetch, readLimit: number}} o */
  constructor(o) {
    super({ ...o, codec: json });
    /** @type {'http'} */
    this.transport = 'http';
    this.url = httpURL(o.url);
    this.token = '';
    /** Aborts every fetch when the connection ends. */
    this.ctl = new AbortController();
    /** @type {Map<string, Exchange>} the open exchanges, by subscription */
    this.subs = new Map();
    /** How many responses are open past their result. */
    this.openCount = 0;
  }

  /** Silence means a dead connection only while a response is open. */
  get watching() { return this.openCount > 0; }

  /** The server's heartbeats come on open responses; the client sends none. */
  get sendsHeartbeats() { return false; }

  /**
   * handshake checks token with a system.ping (401: RpcError
   * Unauthenticated, as auth would answer) and answers as auth would: the
   * subject from the ping, expires_at from the token's exp, no limits (the
   * server advertises none over HTTP; the heartbeat interval comes in each
   * response's header).
   * @param {string} token
   * @param {number} timeoutMs
   * @returns {Promise<import('./wire.js').AuthResult>}
   */
  async handshake(token, timeoutMs) {
    this.token = token;
    const timer = setTimeout(() => this.die(new ConnectTimeoutError(), CloseCode.Normal), timeoutMs);
    try {
      /** @type {{subject: string}} */
      const res = await this.call('system.ping', {});
      this.subject = res.subject;
      return /** @type {any} */ ({ subject: res.subject, expires_at: tokenExpiry(token) });
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * call sends a request as its own POST. auth.refresh is answered here (the
   * token of the requests that follow); stream.unsubscribe ends the
   * subscription's response.
   * @param {string} method @param {any} params @param {AbortSignal} [signal]
   * @returns {Promise<any>}
   */
  call(method, params, signal) {
    if (this.error) return Promise.reject(this.lostError());
    if (method === 'auth.refresh') {
      this.token = String(params?.token ?? '');
      return Promise.resolve({ subject: this.subject, expires_at: tokenExpiry(this.token) });
    }
    if (method === 'stream.unsubscribe') {
      const x = this.subs.get(String(params?.subscription ?? ''));
      if (!x) return Promise.reject(new RpcError(Code.NotFound, 'subscription not found'));
      this.finish(x, true);
      return Promise.resolve({});
    }
    return super.call(method, params, signal);
  }

  /** @param {any} msg */
  transmit(msg) {
    if (this.error) throw this.lostError();
    if (msg.method === '$/heartbeat') return; // the server sends them on open responses
    void this.exchange(msg);
  }

  /**
   * exchange POSTs msg and dispatches its response's lines in order.
   * @param {any} msg
   */
  async exchange(msg) {
    const open = msg.id !== undefined && OPEN_METHODS.has(msg.method);
    /** @type {Exchange} */
    const x = {
      ctl: new AbortController(), id: msg.id, sub: open ? String(msg.params?.subscription ?? '') : '',
      done: msg.id === undefined, open: false, closed: false,
    };
    const abort = () => x.ctl.abort();
    this.ctl.signal.addEventListener('abort', abort, { once: true });
    if (open) {
      const old = this.subs.get(x.sub);
      if (old) this.finish(old, true);
      this.subs.set(x.sub, x);
    }
    /** @type {Record<string, string>} */
    const headers = {
      'Content-Type': 'application/json', Accept: 'application/x-ndjson', Authorization: `Bearer ${this.token}`,
    };
    const meta = msg.params?._meta;
    if (typeof meta?.traceparent === 'string') headers.traceparent = meta.traceparent;
    if (typeof meta?.tracestate === 'string') headers.tracestate = meta.tracestate;
    try {
      const res = await this.o.fetch(this.url, {
        method: 'POST', headers, body: JSON.stringify(msg), signal: x.ctl.signal, cache: 'no-store',
      });
      if (res.status !== 200 || !res.body) {
        await this.refused(res, msg.id);
        return;
      }
      this.advertised(res.headers);
      await this.read(res.body, x);
    } catch (err) {
      if (!x.closed && !this.error) {
        this.die(new ConnectionLostError(`POST /rpc ${msg.method}: ${/** @type {Error} */ (err).message}`, err), CloseCode.Normal);
      }
    } finally {
      this.finish(x, false);
      this.ctl.signal.removeEventListener('abort', abort);
    }
  }

  /**
   * advertised takes the heartbeat interval a response's headers advertise
   * as the socket takes auth's heartbeat_ms: silence is three of the longer
   * of the server's and the client's.
   * @param {Headers} headers
   */
  advertised(headers) {
    const ms = Number(headers.get(HEARTBEAT_HEADER));
    if (Number.isSafeInteger(ms) && ms > 0) {
      [this.beat, this.silence] = heartbeats(this.o.heartbeatInterval, ms);
    }
  }

  /**
   * finish forgets x; closing aborts its fetch too (unsubscribe).
   * @param {Exchange} x @param {boolean} closing
   */
  finish(x, closing) {
    if (closing && !x.closed) {
      x.closed = true;
      x.ctl.abort();
    }
    if (x.open) {
      x.open = false;
      this.openCount--;
    }
    if (x.sub && this.subs.get(x.sub) === x) this.subs.delete(x.sub);
  }

  /**
   * refused ends the connection for a POST refused before its body opened,
   * as the socket would have ended: 401 as close 4001 (the handshake
   * rejects with Unauthenticated, as auth would answer), 413 as 1009, anything
   * else (503, 429, a proxy's error) as a lost connection.
   * @param {Response} res @param {number|undefined} id
   */
  async refused(res, id) {
    const detail = await problemDetail(res);
    if (res.status === 401) {
      // The handshake's refusal is auth's; later, a request is cut off by
      // the close, and made again on the next connection with a new token.
      const p = id === undefined || this.started ? undefined : this.pending.get(id);
      p?.reject(new RpcError(Code.Unauthenticated, `invalid token${detail ? ` (${detail})` : ''}`));
      this.die(new SocketClosedError(CloseCode.Unauthenticated, detail || 'unauthenticated'), CloseCode.Normal);
      return;
    }
    if (res.status === 413) {
      this.die(new SocketClosedError(CloseCode.TooBig, detail || 'request too large'), CloseCode.Normal);
      return;
    }
    this.die(new ConnectionLostError(`POST /rpc answered ${res.status}${detail ? `: ${detail}` : ''}`), CloseCode.Normal);
  }

  /**
   * read dispatches body's NDJSON lines; a line longer than readLimit ends
   * the connection, and so does a body that ends before its last line.
   * @param {ReadableStream<Uint8Array>} body @param {Exchange} x
   */
  async read(body, x) {
    const reader = body.getReader();
    const limit = this.o.readLimit;
    /** @type {Uint8Array[]} */
    let parts = [];
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        let from = 0;
        for (let nl = value.indexOf(10); nl >= 0; nl = value.indexOf(10, from)) {
          const piece = value.subarray(from, nl);
          from = nl + 1;
          if (size + piece.length > limit) return this.tooLong(limit);
          const line = parts.length ? concat([...parts, piece], size + piece.length) : piece;
          parts = [];
          size = 0;
          if (line.length) this.line(x, line);
          if (this.error || x.closed) return;
        }
        if (from < value.length) {
          size += value.length - from;
          if (size > limit) return this.tooLong(limit);
          parts.push(value.subarray(from));
        }
      }
      if (this.error || x.closed || (x.done && size === 0)) return;
      this.die(new ConnectionLostError('the response ended before its last line'), CloseCode.Normal);
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  /** @param {number} limit */
  tooLong(limit) {
    this.die(new FrameError(`a line longer than ${limit} bytes`), CloseCode.TooBig);
  }

  /**
   * line serves one line of x's response.
   * @param {Exchange} x @param {Uint8Array} bytes
   */
  line(x, bytes) {
    let msg;
    try {
      msg = json.decode(bytes);
    } catch (err) {
      this.die(new FrameError(`undecodable line: ${/** @type {Error} */ (err).message}`), CloseCode.UnsupportedData);
      return;
    }
    this.lastRecv = Date.now();
    if (msg === null || typeof msg !== 'object') {
      this.dispatch(msg);
      return;
    }
    if (msg.error && (msg.id === undefined || msg.id === null) && msg.method === undefined) {
      // Why the server ended the response: the close the socket would have had (without one,
      // a going away: reconnect and resume).
      const close = Number(msg.error.data?.close) || CloseCode.GoingAway;
      this.die(new SocketClosedError(close, String(msg.error.message ?? '')), CloseCode.Normal);
      return;
    }
    if (msg.method === 'stream.closed' && msg.params?.subscription === x.sub) x.done = true;
    if (msg.method === undefined && msg.id === x.id) {
      if (msg.error || !x.sub) {
        x.done = true;
      } else if (!x.open) {
        x.open = true;
        if (this.openCount++ === 0) this.lastRecv = Date.now();
      }
      if (msg.error?.code === Code.LimitExceeded && msg.error.data?.limit === Limit.ConnectionsPerSubject) {
        // Each open response is one of the subject's connections: wait as
        // after a close 4029, then subscribe on the next connection (the
        // call fails as cut off, not refused, so that it is made again).
        this.die(new SocketClosedError(CloseCode.LimitExceeded, String(msg.error.message ?? '')), CloseCode.Normal);
        return;
      }
    }
    this.dispatch(msg);
  }

  /** die ends the connection and every fetch of it. @param {Error} err @param {number} code */
  die(err, code) {
    void code;
    this.end(err);
  }

  /** @param {Error} err */
  end(err) {
    if (this.error) return;
    super.end(err);
    this.ctl.abort();
  }

  /** closeNormal ends every request of the connection. */
  closeNormal() {
    this.die(new ClosedError(), CloseCode.Normal);
    return Promise.resolve();
  }
}

/**
 * concat joins parts of total bytes.
 * @param {Uint8Array[]} parts @param {number} total
 */
function concat(parts, total) {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * problemDetail reads the detail (or title) of an RFC 7807 body, at most
 * PROBLEM_BYTES of it, or "".
 * @param {Response} res
 */
async function problemDetail(res) {
  if (!res.body) return '';
  const reader = res.body.getReader();
  /** @type {Uint8Array[]} */
  const parts = [];
  let size = 0;
  try {
    while (size < PROBLEM_BYTES) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      size += value.length;
    }
  } catch {
    return '';
  } finally {
    reader.cancel().catch(() => {});
  }
  try {
    const p = JSON.parse(new TextDecoder().decode(concat(parts, size)));
    return String(p.detail ?? p.title ?? '').slice(0, 200);
  } catch {
    return '';
  }
}
