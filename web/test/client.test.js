import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import WebSocket from 'ws';

import {
  Client, ClosedError, Code, ConnectionLostError, HeartbeatTimeoutError, RpcError, StreamClosedError, dial,
} from '../src/client/index.js';
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
 * @param {FakeServer} s
 * @param {Partial<import('../src/client/client.js').ClientOptions>} [opts]
 */
async function client(s, opts = {}) {
  let n = 0;
  /** @type {string[]} */
  const states = [];
  const c = new Client(s.url, {
    token: () => `tok-${++n}`,
    WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20,
    onStateChange: (st) => states.push(st),
    ...opts,
  });
  await c.connect();
  cleanups.push(() => c.close());
  return Object.assign(c, { states });
}

describe('connecting', () => {
  for (const codec of /** @type {const} */ (['msgpack', 'json'])) {
    it(`authenticates first and calls over ${codec}`, async () => {
      const s = await server();
      const c = await client(s, { codec });
      assert.equal(s.last.protocol, `ballet.v1.${codec}`);
      assert.equal(c.state, 'connected');
      assert.equal(c.subject, 'u1');
      const pong = await c.ping();
      assert.equal(pong.subject, 'u1');
      assert.equal(typeof pong.time, 'number');
      const first = s.last.received[0];
      assert.deepEqual(first, { jsonrpc: '2.0', id: 1, method: 'auth', params: { token: 'tok-1' } });
      assert.equal(s.last.received[1].method, 'system.ping');
    });
  }

  it('dial returns a connected client', async () => {
    const s = await server();
    const c = await dial(s.url, { token: () => 't', WebSocket, logger: silent });
    cleanups.push(() => c.close());
    assert.equal(c.state, 'connected');
  });

  it('rejects a refused token with -32001 and closes', async () => {
    const s = await server();
    s.badTokens.add('bad');
    const c = new Client(s.url, { token: () => 'bad', WebSocket, logger: silent });
    await assert.rejects(c.connect(), (err) => err instanceof RpcError && err.code === Code.Unauthenticated);
    assert.equal(c.state, 'closed');
    await assert.rejects(c.ping(), ClosedError);
  });

  it('fails when the server accepts no subprotocol', async () => {
    const s = await server({ protocols: null });
    // The ws package fails such a handshake before the socket opens, which
    // transport "auto" would take for a proxy and answer over HTTP.
    const c = new Client(s.url, { token: () => 't', WebSocket, logger: silent, transport: 'websocket' });
    await assert.rejects(c.connect());
    assert.equal(c.state, 'closed');
  });

  it('fails when the token function fails', async () => {
    const s = await server();
    const c = new Client(s.url, { token: () => { throw new Error('no session'); }, WebSocket, logger: silent });
    await assert.rejects(c.connect(), /no session/);
  });

  it('keeps trying the first connection with retry', async () => {
    const s = await server();
    s.accepting = false;
    /** @type {Array<[string, Error|undefined]>} */
    const seen = [];
    const c = new Client(s.url, {
      token: () => 't', WebSocket, logger: silent, minBackoff: 5, maxBackoff: 10,
      onStateChange: (st, err) => seen.push([st, err]),
    });
    cleanups.push(() => c.close());
    const p = c.connect({ retry: true });
    await waitFor(() => seen.filter(([, e]) => e).length >= 2, 3000, 'failed attempts');
    s.accepting = true;
    await p;
    assert.equal(c.state, 'connected');
    assert.ok(seen.every(([st]) => st === 'connecting' || st === 'connected'), JSON.stringify(seen.map(([st]) => st)));
  });

  it('answers requests from the server with -32601', async () => {
    const s = await server();
    await client(s);
    s.last.send({ jsonrpc: '2.0', id: 77, method: 'client.whatever', params: {} });
    const reply = await waitFor(() => s.last.received.find((m) => m.id === 77));
    assert.equal(reply.error.code, Code.MethodNotFound);
  });

  it('returns RpcError with the code for errors', async () => {
    const s = await server();
    const c = await client(s);
    await assert.rejects(c.call('nope.method'), (err) => err instanceof RpcError && err.code === Code.MethodNotFound);
  });
});

describe('liveness', () => {
  it('sends heartbeats and ends a silent connection after three intervals', async () => {
    const s = await server();
    /** @type {Error[]} */
    const errs = [];
    // 300 ms: two heartbeats go out before three silent intervals end the connection, with
    // room for a loaded machine's pauses (at 60 ms, a 60 ms pause lost one).
    const c = await client(s, {
      heartbeatInterval: 300,
      onStateChange: (st, err) => { if (st === 'reconnecting' && err) errs.push(err); },
    });
    const first = s.last;
    await waitFor(() => first.received.filter((m) => m.method === '$/heartbeat').length >= 2, 10_000, 'heartbeats');
    const hb = first.received.find((m) => m.method === '$/heartbeat');
    assert.equal(hb.id, undefined);
    assert.equal(typeof hb.params.time, 'number');
    // The fake server never sends heartbeats: the client gives up on it.
    await waitFor(() => errs.length > 0, 10_000, 'heartbeat timeout');
    assert.ok(errs[0] instanceof HeartbeatTimeoutError, String(errs[0]));
    await waitFor(() => c.state === 'connected' && s.conns.length >= 2, 10_000, 'reconnect');
  });

  it('stays connected while the server sends heartbeats', async () => {
    const s = await server();
    const c = await client(s, { heartbeatInterval: 200 });
    const t = setInterval(() => s.last.notify('$/heartbeat', { time: Date.now() }), 25);
    cleanups.push(async () => clearInterval(t));
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(c.state, 'connected');
    assert.equal(s.conns.length, 1);
  });

  it('refreshes the token at 80 % of its lifetime', async () => {
    const s = await server({ ttl: 2 });
    await client(s);
    const refresh = await waitFor(() => s.requests('auth.refresh')[0], 4000, 'auth.refresh');
    assert.equal(refresh.params.token, 'tok-2');
    assert.equal(s.conns.length, 1);
  });
});

describe('reconnecting', () => {
  it('reconnects with a new token and resumes from the last seq without gaps or duplicates', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    const sub = await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq) });
    assert.equal(sub.seq, 0);
    s.append('project:P', 'item.created');
    s.append('project:Q', 'item.created');
    s.append('project:P', 'item.created');
    await waitFor(() => seen.length === 2);
    s.accepting = false;
    s.dropAll();
    await waitFor(() => c.state === 'reconnecting');
    s.append('project:P', 'item.updated');
    s.append('project:P', 'item.updated');
    s.accepting = true;
    await waitFor(() => seen.length === 4, 3000, 'replayed events');
    s.append('project:P', 'item.deleted');
    await waitFor(() => seen.length === 5);
    assert.deepEqual(seen, [1, 3, 4, 5, 6]);
    const resub = s.last.received.find((m) => m.method === 'stream.subscribe');
    assert.deepEqual(resub.params, { subscription: sub.id, stream: 'project:P', from_seq: 3 });
    assert.notEqual(s.last.received[0].params.token, 'tok-1'); // a fresh token for every attempt
    assert.equal(sub.lastSeq, 6);
  });

  it('drops events it has delivered already', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    const sub = await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq) });
    s.append('project:P', 'a');
    s.append('project:P', 'b');
    await waitFor(() => seen.length === 2);
    // A replay that overlaps what was delivered.
    for (const { event } of s.log) s.last.notify('stream.event', { ...event, subscription: sub.id });
    s.append('project:P', 'c');
    await waitFor(() => seen.length === 3);
    assert.deepEqual(seen, [1, 2, 3]);
  });

  it('replays from fromSeq on the first subscribe', async () => {
    const s = await server();
    for (let i = 0; i < 5; i++) s.append('project:P', 'x');
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    const sub = await c.subscribe('project:P', { fromSeq: 2, onEvent: (ev) => seen.push(ev.seq) });
    assert.deepEqual(seen, [3, 4, 5]); // replayed before the answer
    assert.equal(sub.seq, 5);
  });

  it('rejects a too old fromSeq with -32010', async () => {
    const s = await server({ replayLimit: 2 });
    for (let i = 0; i < 5; i++) s.append('project:P', 'x');
    const c = await client(s);
    await assert.rejects(c.subscribe('project:P', { fromSeq: 0 }),
      (err) => err instanceof RpcError && err.code === Code.ResyncRequired && /subscribe project:P/.test(err.message));
  });

  it('calls onResync on -32010 before any newer event, then continues', async () => {
    const s = await server({ replayLimit: 3 });
    const c = await client(s);
    /** @type {Array<number|string>} */
    const seen = [];
    await c.subscribe('project:P', {
      onEvent: (ev) => seen.push(ev.seq),
      onResync: (seq) => seen.push(`resync@${seq}`),
    });
    s.append('project:P', 'x');
    await waitFor(() => seen.length === 1);
    s.accepting = false;
    s.dropAll();
    await waitFor(() => c.state === 'reconnecting');
    for (let i = 0; i < 10; i++) s.append('project:P', 'x');
    // The server sends a live event before answering the plain subscribe.
    s.methods['stream.subscribe'] = (conn, p, msg) => {
      if (p.from_seq !== undefined) {
        conn.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32010, message: 'resync required' } });
        return undefined;
      }
      conn.subs.set(p.subscription, { stream: p.stream });
      const head = s.log.length;
      s.append('project:P', 'live');
      conn.send({ jsonrpc: '2.0', id: msg.id, result: { subscription: p.subscription, seq: head } });
      return undefined;
    };
    s.accepting = true;
    await waitFor(() => seen.length === 3, 3000, 'resync');
    assert.deepEqual(seen, [1, 'resync@11', 12]);
  });

  it('ends the subscription on -32010 without onResync', async () => {
    const s = await server({ replayLimit: 1 });
    const c = await client(s);
    /** @type {Array<Error|null>} */
    const ends = [];
    const sub = await c.subscribe('project:P', { onEnd: (err) => ends.push(err) });
    s.dropAll();
    s.append('project:P', 'x');
    s.append('project:P', 'x');
    await waitFor(() => ends.length === 1, 3000, 'end');
    assert.equal(/** @type {RpcError} */ (ends[0]).code, Code.ResyncRequired);
    assert.equal(sub.err, ends[0]);
  });

  it('resubscribes from the last seq after a lagging close, on the same connection', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    const sub = await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq) });
    s.append('project:P', 'x');
    await waitFor(() => seen.length === 1);
    s.last.subs.delete(sub.id);
    s.last.notify('stream.closed', { subscription: sub.id, reason: 'lagging' });
    s.append('project:P', 'x'); // missed by the closed subscription
    await waitFor(() => seen.length === 2, 3000, 'replay after lagging');
    assert.deepEqual(seen, [1, 2]);
    assert.equal(s.conns.length, 1);
    const subs = s.last.received.filter((m) => m.method === 'stream.subscribe');
    assert.equal(subs[1].params.from_seq, 1);
  });

  it('ends a subscription closed as forbidden', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {Array<Error|null>} */
    const ends = [];
    const sub = await c.subscribe('project:P', { onEnd: (err) => ends.push(err) });
    s.last.notify('stream.closed', { subscription: sub.id, reason: 'forbidden' });
    await waitFor(() => ends.length === 1);
    assert.ok(ends[0] instanceof StreamClosedError);
    assert.equal(/** @type {StreamClosedError} */ (ends[0]).code, Code.Forbidden);
    s.dropAll();
    await waitFor(() => c.state === 'connected' && s.conns.length === 2);
    await c.ping();
    assert.equal(s.last.received.filter((m) => m.method === 'stream.subscribe').length, 0);
  });

  it('makes calls wait for the next connection and fails calls cut off', async () => {
    const s = await server();
    const c = await client(s);
    s.methods['slow'] = () => undefined; // never answers
    const cut = c.call('slow');
    await waitFor(() => s.last.received.some((m) => m.method === 'slow'));
    s.accepting = false;
    s.dropAll();
    await assert.rejects(cut, ConnectionLostError);
    await waitFor(() => c.state === 'reconnecting');
    await assert.rejects(c.ping({ signal: AbortSignal.timeout(30) }), (err) => err.name === 'TimeoutError');
    const waiting = c.ping();
    s.accepting = true;
    const pong = await waiting;
    assert.equal(pong.subject, 'u1');
  });

  it('recovers after dropConnection', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq) });
    c.dropConnection();
    assert.equal(c.state, 'reconnecting');
    s.append('project:P', 'x');
    await waitFor(() => seen.length === 1, 3000, 'event after drop');
    assert.equal(c.state, 'connected');
    assert.deepEqual(c.states, ['connecting', 'connected', 'reconnecting', 'connected']);
  });

  it('closes on a frame of the wrong kind and reconnects', async () => {
    const s = await server();
    const c = await client(s);
    const first = s.last;
    const closed = new Promise((resolve) => first.ws.on('close', (code) => resolve(code)));
    first.ws.send('{"jsonrpc":"2.0","method":"$/heartbeat","params":{}}'); // text on msgpack
    assert.equal(await closed, 1003);
    await waitFor(() => c.state === 'connected' && s.conns.length === 2);
  });
});

describe('subscriptions', () => {
  it('unsubscribes and delivers nothing more', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {number[]} */
    const seen = [];
    /** @type {Array<Error|null>} */
    const ends = [];
    const sub = await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq), onEnd: (e) => ends.push(e) });
    await sub.unsubscribe();
    assert.deepEqual(ends, [null]);
    assert.equal(s.last.subs.size, 0);
    s.append('project:P', 'x');
    await c.ping();
    assert.deepEqual(seen, []);
    await assert.rejects(c.unsubscribe(sub.id), (err) => err instanceof RpcError && err.code === Code.NotFound);
  });

  it('ends everything with ClosedError on close and stops reconnecting', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {Array<Error|null>} */
    const ends = [];
    await c.subscribe('project:P', { onEnd: (e) => ends.push(e) });
    const first = s.last;
    const code = new Promise((resolve) => first.ws.on('close', (cd) => resolve(cd)));
    await c.close();
    assert.equal(await code, 1000);
    assert.ok(ends[0] instanceof ClosedError);
    assert.equal(c.state, 'closed');
    await assert.rejects(c.ping(), ClosedError);
    await assert.rejects(c.subscribe('project:P'), ClosedError);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(s.conns.length, 1);
    await c.close(); // twice is fine
  });

  it('keeps subscription ids unique and restores them in creation order', async () => {
    const s = await server();
    const c = await client(s);
    const a = await c.subscribe('project:A');
    const w = await c.plannerWatch('sess');
    const b = await c.subscribe('project:B');
    assert.equal(new Set([a.id, w.id, b.id]).size, 3);
    s.dropAll();
    await waitFor(() => s.conns.length === 2 && s.last.subs.size === 3, 3000, 'restore');
    const order = s.last.received.filter((m) => m.params?.subscription).map((m) => m.params.subscription);
    assert.deepEqual(order, [a.id, w.id, b.id]);
  });
});

describe('planner', () => {
  it('sends, watches the output in order, and cancels', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {any[]} */
    const outs = [];
    const w = await c.plannerWatch('S1', { onOutput: (o) => outs.push(o) });
    assert.equal(w.running, false);
    const { seq } = await c.plannerSend('S1', 'create a thing');
    assert.equal(seq, 1);
    await assert.rejects(c.plannerSend('S1', 'again'), (err) => err instanceof RpcError && err.code === Code.Conflict);
    s.output('S1', { type: 'text', text: 'Creat' });
    s.output('S1', { type: 'text', text: 'ing.' });
    s.output('S1', { type: 'tool_call', tool: 'create_item', tool_use_id: 't1', input: { title: 'a thing' } });
    s.output('S1', { type: 'tool_result', tool: 'create_item', tool_use_id: 't1', text: 'created P-1', is_error: false });
    s.output('S1', { type: 'done', text: 'end_turn' });
    await waitFor(() => outs.length === 5);
    assert.deepEqual(outs.map((o) => o.type), ['text', 'text', 'tool_call', 'tool_result', 'done']);
    assert.equal(outs.map((o) => o.text).slice(0, 2).join(''), 'Creating.');
    assert.deepEqual(outs[2].input, { title: 'a thing' });
    await c.plannerCancel('S1');
    assert.deepEqual(s.requests('planner.cancel')[0].params, { session: 'S1' });
  });

  it('watches again after a reconnect and calls onResume first', async () => {
    const s = await server();
    const c = await client(s);
    /** @type {any[]} */
    const seen = [];
    await c.plannerWatch('S1', { onOutput: (o) => seen.push(o.type), onResume: (running) => seen.push(`resume:${running}`) });
    s.sessions.set('S1', true);
    s.dropAll();
    // Output sent right after the watch is registered, before its answer.
    s.methods['planner.watch'] = (conn, p, msg) => {
      conn.subs.set(p.subscription, { session: p.session });
      s.output('S1', { type: 'text', text: 'x' });
      conn.send({ jsonrpc: '2.0', id: msg.id, result: { subscription: p.subscription, running: true } });
      return undefined;
    };
    await waitFor(() => seen.length === 2, 3000, 'resume');
    assert.deepEqual(seen, ['resume:true', 'text']);
  });
});

describe('trace context', () => {
  for (const codec of /** @type {const} */ (['msgpack', 'json'])) {
    it(`puts the caller's trace context into params._meta (${codec})`, async () => {
      const s = await server();
      const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
      /** @type {string[]} */
      const asked = [];
      const c = await client(s, {
        codec,
        traceContext: (method) => {
          asked.push(method);
          if (method === 'planner.send') return { traceparent: tp, tracestate: 'vendor=opaque' };
          if (method === 'planner.cancel') throw new Error('no tracer');
          if (method === 'system.ping') return { traceparent: tp };
          return null;
        },
      });
      await c.plannerSend('S1', 'hello');
      const params = {};
      await c.call('system.ping', params);
      await c.plannerCancel('S1');
      assert.deepEqual(s.requests('planner.send')[0].params._meta, { traceparent: tp, tracestate: 'vendor=opaque' });
      assert.deepEqual(s.requests('system.ping')[0].params, { _meta: { traceparent: tp } });
      assert.deepEqual(params, {}, 'the caller\'s params are not changed');
      assert.deepEqual(s.requests('planner.cancel')[0].params, { session: 'S1' }, 'a failing traceContext sends none');
      assert.equal(s.last.received[0].method, 'auth');
      assert.equal(s.last.received[0].params._meta, undefined);
      assert.deepEqual(asked, ['auth', 'planner.send', 'system.ping', 'planner.cancel']);
    });
  }

  it('sends no _meta without the option', async () => {
    const s = await server();
    const c = await client(s);
    await c.plannerSend('S1', 'hello');
    assert.equal(s.requests('planner.send')[0].params._meta, undefined);
  });
});
