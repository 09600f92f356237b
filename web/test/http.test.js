// The client over POST /rpc (streaming HTTP, NDJSON): the framing, the fall
// back from a WebSocket that a proxy refuses, no flapping, the interval
// before the WebSocket is tried again, and subscriptions and watches that
// resume with no gap and no duplicate across a switch.

import assert from 'node:assert/strict';
import http from 'node:http';
import { afterEach, describe, it } from 'node:test';
import WebSocket from 'ws';

import { Client, Code, HeartbeatTimeoutError, RpcError, SocketClosedError } from '../src/client/index.js';
import { httpURL, tokenExpiry } from '../src/client/httpconn.js';
import { FakeServer, silent, waitFor } from './fakeserver.js';

/** @type {Array<() => Promise<void>>} */
let cleanups = [];
afterEach(async () => {
  for (const f of cleanups.reverse()) await f();
  cleanups = [];
});

/** @param {ConstructorParameters<typeof FakeServer>[0]} [opts] */
async function server(opts) {
  const s = await new FakeServer(opts).start();
  cleanups.push(() => s.stop());
  return s;
}

/**
 * jwt is an unsigned token with exp (the client reads exp; the fake server checks nothing).
 * @param {number} exp Unix seconds @param {string} [jti]
 */
function jwt(exp, jti = '') {
  const b64 = (/** @type {object} */ o) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${b64({ alg: 'none' })}.${b64({ sub: 'u1', exp, jti })}.sig`;
}

/**
 * @param {FakeServer} s
 * @param {Partial<import('../src/client/client.js').ClientOptions>} [opts]
 */
async function client(s, opts = {}) {
  let n = 0;
  /** @type {Array<[string, Error|undefined]>} */
  const states = [];
  const c = new Client(s.url, {
    token: () => `tok-${++n}`,
    WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20,
    onStateChange: (st, err) => states.push([st, err]),
    ...opts,
  });
  await c.connect();
  cleanups.push(() => c.close());
  return Object.assign(c, { states });
}

/** @param {FakeServer} s @param {string} method */
const posts = (s, method) => s.conns.filter((c) => c.http && c.received[0].method === method);

/**
 * following is a client over HTTP subscribed to project:P, with the seqs it was given.
 * @param {FakeServer} s
 */
async function following(s) {
  const c = await client(s, { transport: 'http' });
  /** @type {number[]} */
  const got = [];
  await c.subscribe('project:P', { onEvent: (ev) => got.push(ev.seq) });
  return { c, got };
}

/**
 * closedWith waits until c reports a reconnect for the close code.
 * @param {{states: Array<[string, Error|undefined]>}} c @param {number} code
 */
function closedWith(c, code) {
  return waitFor(() => c.states.some(([st, err]) => st === 'reconnecting' && err instanceof SocketClosedError && err.closeCode === code),
    3000, `close ${code}`);
}

/** @param {FakeServer} s @param {import('../src/client/client.js').Client} c */
const resubscribed = (s, c) => waitFor(() => c.state === 'connected' && s.openPosts.length === 1, 3000, 'resubscribed');

describe('HTTP transport', () => {
  it('maps ws URLs to http and reads exp from a token', () => {
    assert.equal(httpURL('wss://h.example/rpc'), 'https://h.example/rpc');
    assert.equal(httpURL('ws://127.0.0.1:1/rpc'), 'http://127.0.0.1:1/rpc');
    assert.equal(httpURL('https://h.example/rpc'), 'https://h.example/rpc');
    assert.equal(tokenExpiry(jwt(1790833600)), 1790833600);
    assert.equal(tokenExpiry('opaque'), 0);
  });

  it('authenticates with a POSTed system.ping and calls one POST each, JSON only', async () => {
    const s = await server();
    const tc = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const c = await client(s, { transport: 'http', codec: 'msgpack', traceContext: () => ({ traceparent: tc }) });
    assert.equal(c.transport, 'http');
    assert.equal(c.subject, 'u1');
    assert.equal(c.limits, null, 'no limits are advertised over HTTP');
    assert.equal(s.upgrades, 0);
    const pong = await c.ping();
    assert.equal(pong.subject, 'u1');
    const pings = posts(s, 'system.ping');
    assert.equal(pings.length, 2);
    for (const p of pings) {
      assert.equal(p.headers?.authorization, 'Bearer tok-1');
      assert.equal(p.headers?.['content-type'], 'application/json');
      assert.equal(p.headers?.traceparent, tc);
      assert.equal(p.received[0].jsonrpc, '2.0');
    }
    await assert.rejects(c.call('nope.method'), (err) => err instanceof RpcError && err.code === Code.MethodNotFound);
    // No heartbeats go out over HTTP, and nothing asks for auth.
    assert.equal(posts(s, '$/heartbeat').length + posts(s, 'auth').length, 0);
  });

  it('refuses a bad token as auth would', async () => {
    const s = await server();
    s.badTokens.add('bad');
    const c = new Client(s.url, { token: () => 'bad', transport: 'http', logger: silent });
    await assert.rejects(c.connect(), (err) => err instanceof RpcError && err.code === Code.Unauthenticated && /expired/.test(err.message));
    assert.equal(c.state, 'closed');
  });

  it('keeps a subscription’s response open, in order, and ends it on unsubscribe', async () => {
    const s = await server();
    const c = await client(s, { transport: 'http' });
    s.append('project:P', 'item.created');
    /** @type {number[]} */
    const got = [];
    const sub = await c.subscribe('project:P', { fromSeq: 0, onEvent: (ev) => got.push(ev.seq) });
    assert.deepEqual(got, [1], 'replayed before the result');
    assert.equal(s.openPosts.length, 1);
    for (let i = 0; i < 5; i++) s.append('project:P', 'item.updated');
    await waitFor(() => got.length === 6, 3000, 'live events');
    assert.deepEqual(got, [1, 2, 3, 4, 5, 6]);
    await sub.unsubscribe();
    await waitFor(() => s.openPosts.length === 0, 3000, 'the response closed');
    assert.equal(posts(s, 'stream.unsubscribe').length, 0, 'nothing to POST: the fetch was aborted');
    assert.equal(c.state, 'connected');
  });

  it('reads lines split across chunks and several in one', async () => {
    const s = await server();
    const raw = http.createServer((req, res) => {
      let body = '';
      req.on('data', (b) => { body += b; });
      req.on('end', () => {
        const msg = JSON.parse(body);
        res.writeHead(200, { 'Content-Type': 'application/x-ndjson' });
        if (msg.method === 'system.ping') {
          res.end(`${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { time: 1, subject: 'u9' } })}\n`);
          return;
        }
        const ev = (/** @type {number} */ seq) => JSON.stringify({
          jsonrpc: '2.0', method: 'stream.event', params: { subscription: msg.params.subscription, seq, type: 'x.é' },
        });
        const text = `${ev(1)}\n${ev(2)}\n${JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { subscription: msg.params.subscription, seq: 2 } })}\n${ev(3)}\n`;
        const bytes = Buffer.from(text);
        let at = 0;
        const step = () => {
          if (at >= bytes.length) return;
          res.write(bytes.subarray(at, at + 7));
          at += 7;
          setTimeout(step, 1);
        };
        step();
      });
    });
    await new Promise((resolve) => raw.listen(0, '127.0.0.1', () => resolve(undefined)));
    cleanups.push(async () => {
      raw.closeAllConnections();
      await new Promise((resolve) => raw.close(resolve));
    });
    void s;
    const c = new Client(`ws://127.0.0.1:${/** @type {any} */ (raw.address()).port}/rpc`, { token: () => 't', transport: 'http', logger: silent });
    await c.connect();
    cleanups.push(() => c.close());
    assert.equal(c.subject, 'u9');
    /** @type {Array<[number, string]>} */
    const got = [];
    await c.subscribe('project:P', { fromSeq: 0, onEvent: (ev) => got.push([ev.seq, ev.type]) });
    await waitFor(() => got.length === 3, 3000, 'three events');
    assert.deepEqual(got, [[1, 'x.é'], [2, 'x.é'], [3, 'x.é']]);
  });

  it('ends the connection on a line longer than the read limit, and on a body cut short', async () => {
    const s = await server();
    s.methods['test.long'] = (conn) => {
      conn.send({ jsonrpc: '2.0', method: 'note', params: { pad: 'x'.repeat(4096) } });
      return undefined;
    };
    const c = await client(s, { transport: 'http', readLimit: 1024 });
    await assert.rejects(c.call('test.long'), /connection lost: a line longer than 1024 bytes/);
    await waitFor(() => c.state === 'connected' && c.states.length >= 3, 3000, 'a new connection');
    s.loseAnswers['system.ping'] = 1;
    await assert.rejects(c.ping(), /connection lost: .*ended before its last line|connection lost: POST/);
    await waitFor(() => c.state === 'connected', 3000, 'connected again');
  });

  it('ends the emulated connection as the close in an error line without id would', async () => {
    const s = await server();
    const { c, got } = await following(s);
    s.append('project:P', 'a');
    await waitFor(() => got.length === 1);
    s.openPosts[0].ws.close(4001, 'token expired');
    await closedWith(c, 4001);
    s.append('project:P', 'b'); // while reconnecting
    await resubscribed(s, c);
    s.append('project:P', 'c');
    await waitFor(() => got.length === 3, 3000, 'events after the close');
    assert.deepEqual(got, [1, 2, 3]);
    const last = posts(s, 'stream.subscribe').at(-1);
    assert.equal(last?.received[0].params.from_seq, 1);
    assert.match(String(last?.headers?.authorization), /^Bearer tok-[2-9]/, 'a new token after 4001');
  });

  it('takes a subscription refused for the subject’s connections as a close 4029, and resumes', async () => {
    const s = await server();
    const { c, got } = await following(s);
    s.append('project:P', 'a');
    await waitFor(() => got.length === 1);
    let refuse = 1;
    s.methods['stream.subscribe'] = (conn, p, msg) => {
      if (refuse-- <= 0) {
        delete s.methods['stream.subscribe'];
        s.handle(conn, msg); // served as usual
        return undefined;
      }
      conn.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32029, message: 'limit exceeded: connections_per_subject (at most 1)', data: { limit: 'connections_per_subject', max: 1 } } });
      void p;
      return undefined;
    };
    c.dropConnection();
    await closedWith(c, 4029);
    await resubscribed(s, c);
    s.append('project:P', 'b');
    await waitFor(() => got.length === 2, 3000, 'the next event');
    assert.deepEqual(got, [1, 2]);
  });

  it('takes a 401 after the handshake as a close 4001: a new token, and the subscription resumes', async () => {
    const s = await server();
    const { c, got } = await following(s);
    s.expireSubscribes = 1;
    c.dropConnection();
    await closedWith(c, 4001);
    await resubscribed(s, c);
    assert.equal(s.expireSubscribes, 0);
    s.append('project:P', 'a');
    await waitFor(() => got.length === 1, 3000, 'an event');
    assert.equal(s.openPosts[0].headers?.authorization, 'Bearer tok-3', 'a new token after the 401');
  });

  it('watches for silence only while a response is open', async () => {
    const s = await server();
    const c = await client(s, { transport: 'http', heartbeatInterval: 20 });
    await new Promise((r) => setTimeout(r, 150));
    assert.equal(c.state, 'connected', 'no response open: silence is no failure');
    await c.subscribe('project:P');
    await waitFor(() => c.states.some(([st, err]) => st === 'reconnecting' && err instanceof HeartbeatTimeoutError), 3000, 'heartbeat timeout');
  });

  it('is silent for as long as the heartbeat interval a response advertises', async () => {
    const s = await server();
    s.heartbeatMs = 200;
    const c = await client(s, { transport: 'http', heartbeatInterval: 20 });
    await c.subscribe('project:P');
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(c.states.filter(([st]) => st === 'reconnecting'), [], 'three of the server\'s 200 ms have not passed');
    await waitFor(() => c.states.some(([st, err]) => st === 'reconnecting' && err instanceof HeartbeatTimeoutError), 3000, 'heartbeat timeout');
  });

  it('swaps the token on auth.refresh: the POSTs after it carry the new one', async () => {
    const s = await server();
    let n = 0;
    const c = await client(s, { transport: 'http', token: () => jwt(Math.floor(Date.now() / 1000) + 2, `r${++n}`) });
    const first = s.bearers[0];
    await waitFor(() => n >= 2, 5000, 'a refresh');
    await c.ping();
    assert.notEqual(s.bearers.at(-1), first);
    assert.equal(posts(s, 'auth.refresh').length, 0);
  });
});

describe('falling back to HTTP', () => {
  it('when the upgrade is refused, and stays there across reconnects', async () => {
    const s = await server();
    s.websocket = false;
    const c = await client(s);
    assert.equal(c.transport, 'http');
    assert.equal(s.upgrades, 1);
    for (let i = 0; i < 3; i++) {
      const before = posts(s, 'system.ping').length;
      c.dropConnection();
      await waitFor(() => posts(s, 'system.ping').length > before && c.state === 'connected', 3000, 'reconnected');
    }
    s.websocket = true;
    c.dropConnection();
    await waitFor(() => posts(s, 'system.ping').length >= 5 && c.state === 'connected', 3000, 'reconnected');
    assert.equal(c.transport, 'http', 'no flapping back to the WebSocket');
    assert.equal(s.upgrades, 1, 'one upgrade attempt in all');
  });

  it('not when the server is down altogether, nor with transport "websocket"', async () => {
    const s = await server();
    s.accepting = false;
    let failed = 0;
    const c = new Client(s.url, {
      token: () => 't', WebSocket, logger: silent, minBackoff: 300, maxBackoff: 300, random: () => 0.99,
      onStateChange: (_st, err) => { if (err) failed++; },
    });
    cleanups.push(() => c.close());
    const p = c.connect({ retry: true });
    await waitFor(() => failed >= 2, 3000, 'failed attempts');
    s.accepting = true; // within the backoff before the next attempt
    await p;
    assert.equal(c.transport, 'websocket');

    s.websocket = false;
    const w = new Client(s.url, { token: () => 't', WebSocket, logger: silent, transport: 'websocket' });
    const posted = s.bearers.length;
    await assert.rejects(w.connect());
    assert.equal(s.bearers.length, posted, 'no POST with transport "websocket"');
  });

  it('tries the WebSocket again only at a reconnect after the interval (a fake clock)', async () => {
    const s = await server();
    s.websocket = false;
    let now = 1_000_000;
    const c = await client(s, { websocketRetryInterval: 60_000, now: () => now });
    assert.equal(c.transport, 'http');
    now += 59_999;
    s.websocket = true;
    c.dropConnection();
    await waitFor(() => c.state === 'connected' && posts(s, 'system.ping').length === 2, 3000, 'reconnected');
    assert.equal(c.transport, 'http', 'before the interval');
    assert.equal(s.upgrades, 1);
    // Past the interval nothing happens by itself: the next reconnect tries.
    now += 1;
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(c.transport, 'http');
    // Refused again: back on HTTP at once, for another interval.
    s.websocket = false;
    c.dropConnection();
    await waitFor(() => c.state === 'connected' && posts(s, 'system.ping').length === 3, 3000, 'reconnected');
    assert.equal(s.upgrades, 2);
    assert.equal(c.transport, 'http');
    now += 59_999;
    s.websocket = true;
    c.dropConnection();
    await waitFor(() => c.state === 'connected' && posts(s, 'system.ping').length === 4, 3000, 'reconnected');
    assert.equal(s.upgrades, 2, 'the interval started again at the last fall back');
    now += 1;
    c.dropConnection();
    await waitFor(() => c.state === 'connected' && c.transport === 'websocket', 3000, 'on the WebSocket');
    assert.equal(s.upgrades, 3);
  });

  for (const [from, to] of [['websocket', 'http'], ['http', 'websocket']]) {
    it(`resumes subscriptions and watches with no gap and no duplicate from ${from} to ${to}`, async () => {
      const s = await server();
      let now = 0;
      s.websocket = from === 'websocket';
      // A long, fixed backoff: the server comes back between two attempts, never during one.
      const c = await client(s, { websocketRetryInterval: 1000, now: () => now, minBackoff: 200, maxBackoff: 200, random: () => 0.99 });
      assert.equal(c.transport, from);
      /** @type {number[]} */
      const got = [];
      /** @type {string[]} */
      const said = [];
      /** @type {string[]} */
      const resumes = [];
      await c.subscribe('project:P', { onEvent: (ev) => got.push(ev.seq) });
      await c.plannerWatch('S', { onOutput: (o) => said.push(`${o.offset}:${o.text}`), onResume: () => resumes.push('resume') });
      s.append('project:P', 'a');
      s.output('S', { type: 'text', text: 'one' });
      await waitFor(() => got.length === 1 && said.length === 1, 3000, 'first event and output');
      s.websocket = to === 'websocket';
      now += 1000;
      s.accepting = false;
      s.dropAll();
      // While no connection is up: events and outputs the client must catch up on.
      const seen = c.states.length;
      await waitFor(() => c.states.length >= seen + 2, 3000, 'the drop and a failed attempt');
      for (let i = 0; i < 3; i++) s.append('project:P', 'b');
      s.output('S', { type: 'text', text: 'two' });
      s.output('S', { type: 'text', text: 'three' });
      s.accepting = true;
      await waitFor(() => c.state === 'connected' && c.transport === to, 3000, `on ${to}`);
      s.append('project:P', 'c');
      s.output('S', { type: 'done' });
      await waitFor(() => got.length === 5 && said.length === 4, 3000, 'caught up');
      await new Promise((r) => setTimeout(r, 30));
      assert.deepEqual(got, [1, 2, 3, 4, 5]);
      assert.deepEqual(said, ['1:one', '2:two', '3:three', '4:undefined']);
      assert.deepEqual(resumes, []);
      const again = s.requests('stream.subscribe').at(-1);
      assert.equal(again.params.from_seq, 1);
      const watch = s.requests('planner.watch').at(-1);
      assert.equal(watch.params.after, 1);
    });
  }
});
