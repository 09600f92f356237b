// A small realtime API server for the client's unit tests, over the ws
// package on loopback, and over POST /rpc (NDJSON, see http.test.js) on the
// same port: auth, ping, change streams with replay from
// from_seq (and -32010 beyond a replay limit), planner watches with turns,
// offsets and resuming (turn, after, resumed), planner.send with
// idempotency keys, advertised limits with -32029 refusals, and hooks to
// misbehave.

import http from 'node:http';

import { decode, encode } from '@msgpack/msgpack';
import { WebSocketServer } from 'ws';

export const PROTOCOLS = ['ballet.v1.msgpack', 'ballet.v1.json'];

/**
 * @typedef {object} FakeConn
 * @property {{readyState: number, terminate: () => void, close: (code?: number, reason?: string) => void}} ws
 *   the socket; over HTTP, the response (close writes the error line without id)
 * @property {string} protocol
 * @property {any[]} received messages received, decoded
 * @property {boolean} authed
 * @property {Map<string, {stream?: string, session?: string}>} subs
 * @property {(msg: object) => void} send
 * @property {(method: string, params: object) => void} notify
 * @property {boolean} [http] one POST /rpc
 * @property {Record<string, string|string[]|undefined>} [headers] its request headers
 */

export class FakeServer {
  /**
   * @param {{protocols?: string[]|null, replayLimit?: number, subject?: string, ttl?: number, limits?: Record<string, number>, resume?: boolean}} [opts]
   *   protocols: null accepts without any subprotocol; ttl: token lifetime in seconds;
   *   limits: advertised in the auth results (none by default, as an older
   *   server), and "subscriptions" enforced with -32029; resume: false for a
   *   server without the resume extension (outputs without turn and offset,
   *   no "resumed", no idempotency keys)
   */
  constructor(opts = {}) {
    this.protocols = opts.protocols === undefined ? PROTOCOLS : opts.protocols;
    this.replayLimit = opts.replayLimit ?? 1000;
    this.subject = opts.subject ?? 'u1';
    this.ttl = opts.ttl ?? 3600;
    this.limits = opts.limits;
    /** How many of the next requests after auth to refuse for a rate. */
    this.refuseRequests = 0;
    /** The rate they are refused for: requests, subject_requests, or replay. */
    this.refuseLimit = 'requests';
    /** The retry_after_ms of those refusals. */
    this.retryAfterMs = 20;
    /** @type {Array<{method: string, at: number}>} requests refused for the rate */
    this.refused = [];
    /** @type {any[]} the event log; seq = index + 1 */
    this.log = [];
    /** @type {FakeConn[]} */
    this.conns = [];
    /** @type {Set<string>} tokens refused by auth */
    this.badTokens = new Set();
    /** @type {Record<string, (conn: FakeConn, params: any, msg: any) => any>} extra or replaced methods */
    this.methods = {};
    /** @type {Map<string, boolean>} planner sessions: running */
    this.sessions = new Map();
    this.resume = opts.resume ?? true;
    /** @type {Map<string, string>} planner sessions: their latest turn */
    this.turnOf = new Map();
    /** @type {Map<string, {session: string, outputs: any[]}>} turns kept for resuming, by id */
    this.turns = new Map();
    this.nextTurn = 0;
    /** @type {Set<string>} turns whose output is no longer kept: resuming them fails */
    this.forgotten = new Set();
    /** @type {Map<string, number>} "session key" → the seq its send answered */
    this.keys = new Map();
    this.nextSeq = 0;
    /** @type {Record<string, number>} how many of the next answers to a method are lost with their connection */
    this.loseAnswers = {};
    this.accepting = true;
    /** Whether WebSocket upgrades are taken (false: refused with 403, as a proxy that blocks them). */
    this.websocket = true;
    /** WebSocket upgrade attempts. */
    this.upgrades = 0;
    /** @type {string[]} tokens of the POSTs, in order */
    this.bearers = [];
    /** How many of the next POSTed stream.subscribes to refuse 401, as if their token had just expired. */
    this.expireSubscribes = 0;
    /** The heartbeat interval POST /rpc's responses advertise (Ballet-Heartbeat-Ms); 0: none. */
    this.heartbeatMs = 0;
    /** @type {Array<(conn: FakeConn) => void>} */
    this.waiters = [];
  }

  async start() {
    this.server = http.createServer((req, res) => this.post(req, res));
    this.wss = new WebSocketServer({
      server: this.server,
      handleProtocols: (offered) => {
        if (this.protocols === null) return false;
        for (const p of this.protocols) if (offered.has(p)) return p;
        return false;
      },
      verifyClient: (_info, cb) => {
        this.upgrades++;
        if (!this.websocket) cb(false, 403);
        else cb(this.accepting, 503);
      },
    });
    await new Promise((resolve) => this.server.listen(0, '127.0.0.1', () => resolve(undefined)));
    this.url = `ws://127.0.0.1:${/** @type {any} */ (this.server.address()).port}/rpc`;
    this.wss.on('connection', (ws) => this.accept(ws));
    return this;
  }

  async stop() {
    for (const c of this.conns) c.ws.terminate();
    await new Promise((resolve) => this.wss.close(resolve));
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /**
   * post serves one POST /rpc as the contract says: the bearer token
   * checked before the body (401), one request, its answer as NDJSON; a
   * stream.subscribe or planner.watch keeps the response open until the
   * client aborts it, a stream.closed, or close (the error line without id).
   * @param {import('node:http').IncomingMessage} req @param {import('node:http').ServerResponse} res
   */
  post(req, res) {
    if (req.method !== 'POST' || req.url !== '/rpc') {
      res.writeHead(404).end();
      return;
    }
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    this.bearers.push(token);
    if (!this.accepting) {
      res.writeHead(503, { 'Retry-After': '1' }).end();
      return;
    }
    if (!token || this.badTokens.has(token)) {
      res.writeHead(401, { 'Content-Type': 'application/problem+json', 'WWW-Authenticate': 'Bearer' })
        .end(JSON.stringify({ title: 'Unauthorized', status: 401, detail: 'expired' }));
      return;
    }
    /** @type {Buffer[]} */
    const body = [];
    req.on('data', (b) => body.push(b));
    req.on('end', () => {
      const msg = JSON.parse(Buffer.concat(body).toString());
      if (msg.method === 'stream.subscribe' && this.expireSubscribes > 0) {
        this.expireSubscribes--;
        res.writeHead(401, { 'Content-Type': 'application/problem+json', 'WWW-Authenticate': 'Bearer' })
          .end(JSON.stringify({ title: 'Unauthorized', status: 401, detail: 'expired' }));
        return;
      }
      /** @type {Record<string, string>} */
      const head = { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store' };
      if (this.heartbeatMs) head['Ballet-Heartbeat-Ms'] = String(this.heartbeatMs);
      res.writeHead(200, head);
      res.flushHeaders();
      const sock = {
        readyState: 1,
        terminate: () => {
          sock.readyState = 3;
          res.destroy();
        },
        close: (/** @type {number} */ code = 1000, reason = '') => {
          if (sock.readyState !== 1) return;
          const rpc = code === 4001 ? -32001 : code === 4029 ? -32029 : -32000;
          res.end(`${JSON.stringify({ jsonrpc: '2.0', error: { code: rpc, message: reason, data: { close: code } } })}\n`);
          sock.readyState = 3;
        },
      };
      /** @type {FakeConn} */
      const conn = {
        ws: sock, protocol: 'ballet.v1.json', received: [msg], authed: true, subs: new Map(), http: true, headers: req.headers,
        send: (m) => {
          if (sock.readyState !== 1) return;
          res.write(`${JSON.stringify(m)}\n`);
          const opens = msg.method === 'stream.subscribe' || msg.method === 'planner.watch';
          if (m.id === msg.id && (m.error || !opens)) {
            sock.readyState = 3;
            res.end();
          }
        },
        notify: (method, params) => {
          conn.send({ jsonrpc: '2.0', method, params });
          if (method === 'stream.closed') {
            sock.readyState = 3;
            res.end();
          }
        },
      };
      res.on('close', () => { sock.readyState = 3; });
      this.conns.push(conn);
      if (msg.id === undefined) res.end();
      else this.handle(conn, msg);
    });
  }

  /** The POSTs open now: subscriptions and watches. */
  get openPosts() {
    return this.conns.filter((c) => c.http && c.ws.readyState === 1);
  }

  /** @param {import('ws').WebSocket} ws */
  accept(ws) {
    const protocol = ws.protocol;
    const binary = protocol !== 'ballet.v1.json';
    /** @type {FakeConn} */
    const conn = {
      ws, protocol, received: [], authed: false, subs: new Map(),
      send: (msg) => {
        if (ws.readyState !== 1) return;
        if (binary) ws.send(encode(msg));
        else ws.send(JSON.stringify(msg));
      },
      notify: (method, params) => conn.send({ jsonrpc: '2.0', method, params }),
    };
    this.conns.push(conn);
    if (protocol === '') {
      ws.close(1008, 'no supported subprotocol');
      return;
    }
    ws.on('message', (data, isBinary) => {
      if (isBinary !== binary) {
        ws.close(1003, 'wrong frame kind');
        return;
      }
      const msg = binary ? decode(/** @type {Buffer} */ (data)) : JSON.parse(data.toString());
      conn.received.push(msg);
      this.handle(conn, msg);
    });
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w(conn);
  }

  /** nextConn resolves with the next connection accepted. */
  nextConn() {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The latest connection. */
  get last() {
    return this.conns[this.conns.length - 1];
  }

  /** @param {FakeConn} conn @param {any} msg */
  handle(conn, msg) {
    if (msg.id === undefined) return; // notifications: $/heartbeat
    const reply = (/** @type {any} */ result) => {
      if (this.loseAnswers[msg.method] > 0) {
        this.loseAnswers[msg.method]--;
        conn.ws.terminate();
        return;
      }
      conn.send({ jsonrpc: '2.0', id: msg.id, result });
    };
    const fail = (/** @type {number} */ code, /** @type {string} */ message, /** @type {any} */ data) => conn.send({
      jsonrpc: '2.0', id: msg.id, error: data === undefined ? { code, message } : { code, message, data },
    });
    const p = msg.params ?? {};
    if (conn.http && (msg.method === 'auth' || msg.method === 'auth.refresh')) {
      fail(-32600, `${msg.method} is not available over HTTP: the Authorization header authenticates each request`);
      return;
    }
    if (!conn.authed && msg.method !== 'auth') {
      fail(-32001, 'auth first');
      conn.ws.close(4001, 'unauthenticated');
      return;
    }
    if (conn.authed && this.refuseRequests > 0) {
      this.refuseRequests--;
      this.refused.push({ method: msg.method, at: Date.now() });
      const limit = this.refuseLimit;
      const max = this.limits?.[{ replay: 'replay_events_per_second' }[limit] ?? `${limit}_per_second`] ?? 100;
      fail(-32029, `limit exceeded: ${limit} (at most ${max}), retry after ${this.retryAfterMs} ms`,
        { limit, max, retry_after_ms: this.retryAfterMs });
      return;
    }
    const custom = this.methods[msg.method];
    if (custom) {
      const r = custom(conn, p, msg);
      if (r !== undefined) reply(r);
      return;
    }
    switch (msg.method) {
      case 'auth':
      case 'auth.refresh':
        if (this.badTokens.has(p.token)) {
          fail(-32001, 'invalid token');
          if (msg.method === 'auth') conn.ws.close(4001, 'unauthenticated');
          return;
        }
        conn.authed = true;
        reply({
          subject: this.subject, expires_at: Math.floor(Date.now() / 1000) + this.ttl,
          ...(this.limits ? { limits: this.limits } : {}),
        });
        return;
      case 'system.ping':
        reply({ time: Date.now(), subject: this.subject });
        return;
      case 'stream.subscribe': {
        if (conn.subs.has(p.subscription)) return fail(-32602, 'duplicate subscription');
        if (this.full(conn)) return this.refuseSubscription(fail);
        const head = this.log.length;
        if (p.from_seq !== undefined) {
          if (head - p.from_seq > this.replayLimit || p.from_seq > head) return fail(-32010, 'resync required');
          for (const ev of this.log.slice(p.from_seq)) {
            if (ev.stream === p.stream) conn.notify('stream.event', { ...ev.event, subscription: p.subscription });
          }
        }
        conn.subs.set(p.subscription, { stream: p.stream });
        reply({ subscription: p.subscription, seq: head });
        return;
      }
      case 'stream.unsubscribe':
        if (!conn.subs.delete(p.subscription)) return fail(-32004, 'not found');
        reply({});
        return;
      case 'planner.watch': {
        if (conn.subs.has(p.subscription)) return fail(-32602, 'duplicate subscription');
        if (this.full(conn)) return this.refuseSubscription(fail);
        conn.subs.set(p.subscription, { session: p.session });
        const running = this.sessions.get(p.session) ?? false;
        /** @type {any} */
        const res = { subscription: p.subscription, running };
        if (!this.resume) return reply(res);
        const cur = running ? this.turnOf.get(p.session) : undefined;
        if (cur) res.turn = cur;
        if (p.after === undefined) return reply(res);
        const id = p.turn || cur;
        const t = id && !this.forgotten.has(id) ? this.turns.get(id) : undefined;
        res.resumed = !!t;
        if (t) {
          res.turn = id;
          for (const o of t.outputs.slice(p.after)) conn.notify('planner.output', { subscription: p.subscription, ...o });
        }
        reply(res);
        return;
      }
      case 'planner.send': {
        const key = `${p.session} ${p.idempotency_key}`;
        if (this.resume && p.idempotency_key !== undefined && this.keys.has(key)) return reply({ seq: this.keys.get(key) });
        if (this.sessions.get(p.session)) return fail(-32009, 'a turn is running');
        this.sessions.set(p.session, true);
        const id = `T${++this.nextTurn}`;
        this.turnOf.set(p.session, id);
        this.turns.set(id, { session: p.session, outputs: [] });
        const seq = ++this.nextSeq;
        if (this.resume && p.idempotency_key !== undefined) this.keys.set(key, seq);
        reply({ seq });
        return;
      }
      case 'planner.cancel':
        this.sessions.set(p.session, false);
        reply({});
        return;
      default:
        fail(-32601, `method ${msg.method} not found`);
    }
  }

  /** @param {FakeConn} conn whether it holds as many subscriptions as the limit */
  full(conn) {
    const max = this.limits?.subscriptions;
    return max !== undefined && conn.subs.size >= max;
  }

  /** @param {(code: number, message: string, data: any) => void} fail */
  refuseSubscription(fail) {
    const max = this.limits?.subscriptions;
    fail(-32029, `limit exceeded: subscriptions (at most ${max})`, { limit: 'subscriptions', max });
  }

  /**
   * append records an event on stream and sends it to live subscribers.
   * @param {string} stream @param {string} type @param {object} [payload]
   * @returns {number} its seq
   */
  append(stream, type, payload = {}) {
    const seq = this.log.length + 1;
    const event = {
      seq, type, entity_type: 'item', entity_id: `id-${seq}`, entity_key: `K-${seq}`,
      occurred_at: Date.now(), actor: { kind: 'human', subject: this.subject }, payload,
    };
    this.log.push({ stream, event });
    for (const c of this.conns) {
      if (!c.authed || c.ws.readyState !== 1) continue;
      for (const [id, s] of c.subs) {
        if (s.stream === stream) c.notify('stream.event', { ...event, subscription: id });
      }
    }
    return seq;
  }

  /**
   * output numbers out as the next output of session's turn (a turn is
   * begun when none was), keeps it for resuming, and sends it to every
   * watcher of session unless opts.send is false (an output lost on the
   * way). done ends the turn.
   * @param {string} session @param {object} out @param {{send?: boolean}} [opts]
   * @returns {any} the output as sent
   */
  output(session, out, opts = {}) {
    let id = this.turnOf.get(session);
    let t = id ? this.turns.get(id) : undefined;
    if (!t || !this.sessions.get(session)) {
      id = `T${++this.nextTurn}`;
      t = { session, outputs: [] };
      this.turnOf.set(session, id);
      this.turns.set(id, t);
      this.sessions.set(session, true);
    }
    const o = this.resume ? { session, turn: id, offset: t.outputs.length + 1, ...out } : { session, ...out };
    t.outputs.push(o);
    if (/** @type {any} */ (out).type === 'done') this.sessions.set(session, false);
    if (opts.send !== false) this.sendOutput(o);
    return o;
  }

  /** @param {any} o an output to send again to every watcher of its session */
  sendOutput(o) {
    for (const c of this.conns) {
      if (c.ws.readyState !== 1) continue;
      for (const [id, s] of c.subs) {
        if (s.session === o.session) c.notify('planner.output', { subscription: id, ...o });
      }
    }
  }

  /** dropAll ends every connection abruptly. */
  dropAll() {
    for (const c of this.conns) c.ws.terminate();
  }

  /**
   * received returns the messages with method received on every connection.
   * @param {string} method
   */
  requests(method) {
    return this.conns.flatMap((c) => c.received.filter((m) => m.method === method));
  }
}

/**
 * waitFor polls cond until it is truthy (or throws after timeoutMs).
 * @template T
 * @param {() => T} cond @param {number} [timeoutMs] @param {string} [what]
 * @returns {Promise<T>}
 */
export async function waitFor(cond, timeoutMs = 3000, what = 'condition') {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = cond();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export const silent = { debug() {}, info() {}, warn() {} };
