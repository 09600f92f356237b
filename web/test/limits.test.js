import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import WebSocket from 'ws';

import {
  Backoff, Client, Code, HeartbeatTimeoutError, Limit, LimitError, RpcError, heartbeats, utf8Length,
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
  const c = new Client(s.url, { token: () => 't', WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20, ...opts });
  await c.connect();
  cleanups.push(() => c.close());
  return c;
}

/** @param {number} ms */
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** @param {unknown} err @param {string} limit */
function isLimit(err, limit) {
  return err instanceof LimitError && err instanceof RpcError && err.code === Code.LimitExceeded && err.limit === limit;
}

describe('heartbeat interval', () => {
  it('follows the server: the user’s when set, else the server’s, else 15 s', () => {
    assert.deepEqual(heartbeats(undefined, undefined), [15000, 15000]);
    assert.deepEqual(heartbeats(0, 60), [60, 60]);
    assert.deepEqual(heartbeats(500, undefined), [500, 500]);
    // Send at the shorter, give up after three of the longer.
    assert.deepEqual(heartbeats(1000, 60), [60, 1000]);
    assert.deepEqual(heartbeats(30, 60), [30, 60]);
  });

  it('sends at the advertised heartbeat_ms and gives up after three of them', async () => {
    const s = await server({ limits: { heartbeat_ms: 60 } });
    /** @type {Error[]} */
    const errs = [];
    const c = await client(s, { onStateChange: (st, err) => { if (st === 'reconnecting' && err) errs.push(err); } });
    assert.equal(c.limits?.heartbeat_ms, 60);
    const first = s.last;
    await waitFor(() => first.received.filter((m) => m.method === '$/heartbeat').length >= 2, 1000, 'heartbeats');
    await waitFor(() => errs.length > 0, 1000, 'heartbeat timeout'); // the fake server sends none
    assert.ok(errs[0] instanceof HeartbeatTimeoutError, String(errs[0]));
  });

  it('sends at the server’s interval when the option is longer, and waits for the option’s', async () => {
    const s = await server({ limits: { heartbeat_ms: 50 } });
    const c = await client(s, { heartbeatInterval: 1000 });
    await sleep(500);
    assert.ok(s.last.received.filter((m) => m.method === '$/heartbeat').length >= 4);
    assert.equal(c.state, 'connected'); // silence is measured in the longer interval
    assert.equal(s.conns.length, 1);
  });
});

describe('subscription limit', () => {
  it('refuses a subscription or watch beyond the limit without a request', async () => {
    const s = await server({ limits: { subscriptions: 2 } });
    const c = await client(s);
    assert.equal(c.limits?.subscriptions, 2);
    const a = await c.subscribe('project:A');
    await c.plannerWatch('S1');
    await assert.rejects(c.subscribe('project:B'), (err) => isLimit(err, Limit.Subscriptions)
      && /** @type {LimitError} */ (err).max === 2 && /subscribe project:B/.test(/** @type {Error} */ (err).message));
    await assert.rejects(c.plannerWatch('S2'), (err) => isLimit(err, Limit.Subscriptions));
    assert.equal(s.requests('stream.subscribe').length, 1);
    assert.equal(s.requests('planner.watch').length, 1);
    await a.unsubscribe();
    await c.subscribe('project:B');
  });

  it('turns the server’s -32029 into a LimitError', async () => {
    const s = await server({ limits: { subscriptions: 1 } });
    const c = await client(s);
    await c.subscribe('project:A');
    await assert.rejects(c.call('stream.subscribe', { subscription: 'raw', stream: 'project:B' }),
      (err) => isLimit(err, Limit.Subscriptions) && /** @type {LimitError} */ (err).max === 1
        && /** @type {LimitError} */ (err).retryAfterMs === 0);
  });

  it('enforces nothing for a server that advertises no limits', async () => {
    const s = await server();
    const c = await client(s);
    assert.equal(c.limits, null);
    for (let i = 0; i < 5; i++) await c.subscribe(`project:P${i}`);
  });
});

describe('planner message limit', () => {
  it('counts bytes of UTF-8', () => {
    assert.equal(utf8Length(''), 0);
    assert.equal(utf8Length('abc'), 3);
    assert.equal(utf8Length('é'), 2);
    assert.equal(utf8Length('€'), 3);
    assert.equal(utf8Length('😀'), 4); // two UTF-16 code units
  });

  it('refuses a text of more bytes than planner_message_bytes without a request', async () => {
    const s = await server({ limits: { planner_message_bytes: 8 } });
    const c = await client(s);
    assert.equal(c.limits?.planner_message_bytes, 8);
    await assert.rejects(c.plannerSend('S1', 'ééééé'), (err) => err instanceof LimitError && err instanceof RpcError
      && err.code === Code.InvalidParams && err.limit === Limit.PlannerMessageBytes && err.max === 8
      && /planner\.send/.test(err.message));
    assert.equal(s.requests('planner.send').length, 0);
    assert.deepEqual(await c.plannerSend('S1', 'éééé'), { seq: 1 }); // 4 characters, 8 bytes
    assert.equal(s.requests('planner.send').length, 1);
  });

  it('sends any text to a server that advertises no planner limit', async () => {
    const s = await server({ limits: { subscriptions: 2 } });
    const c = await client(s);
    await c.plannerSend('S1', 'é'.repeat(100_000));
    assert.equal(s.requests('planner.send').length, 1);
  });
});

describe('request rate', () => {
  it('sends a refused request again after retry_after_ms', async () => {
    const s = await server({ limits: { requests_per_second: 5 } });
    const c = await client(s);
    s.retryAfterMs = 40;
    s.refuseRequests = 2;
    const start = Date.now();
    const pong = await c.ping();
    assert.equal(pong.subject, 'u1');
    assert.equal(s.refused.length, 2);
    assert.ok(Date.now() - start >= 80, `answered after ${Date.now() - start} ms`);
    assert.equal(s.requests('system.ping').length, 3);
  });

  it('rejects with the LimitError past rateLimitRetries, and stops waiting on abort', async () => {
    const s = await server({ limits: { requests_per_second: 5 } });
    const none = await client(s, { rateLimitRetries: 0 });
    s.retryAfterMs = 40;
    s.refuseRequests = 1;
    await assert.rejects(none.ping(), (err) => isLimit(err, Limit.Requests)
      && /** @type {LimitError} */ (err).retryAfterMs === 40 && /** @type {LimitError} */ (err).max === 5);

    const c = await client(s);
    s.retryAfterMs = 10_000;
    s.refuseRequests = 1;
    const start = Date.now();
    await assert.rejects(c.ping({ signal: AbortSignal.timeout(50) }), (err) => err.name === 'TimeoutError');
    assert.ok(Date.now() - start < 1000);
  });

  it('sends a request refused for the subject\'s rate again, and a resubscribe refused for its replays', async () => {
    const s = await server({ limits: { requests_per_second: 5, subject_requests_per_second: 7, replay_events_per_second: 9 } });
    const c = await client(s, { rateLimitRetries: 0 });
    assert.equal(c.limits?.subject_requests_per_second, 7);
    assert.equal(c.limits?.replay_events_per_second, 9);
    s.refuseLimit = 'subject_requests';
    s.refuseRequests = 1;
    await assert.rejects(c.ping(), (err) => isLimit(err, Limit.SubjectRequests) && /** @type {LimitError} */ (err).max === 7);
    const retrying = await client(s);
    s.refuseRequests = 2;
    assert.equal((await retrying.ping()).subject, 'u1');
    assert.equal(s.refused.length, 3);

    /** @type {number[]} */
    const seen = [];
    /** @type {Array<Error|null>} */
    const ends = [];
    await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq), onEnd: (err) => ends.push(err) });
    s.append('project:P', 'x');
    await waitFor(() => seen.length === 1, 3000, 'the first event');
    s.refuseLimit = 'replay';
    s.refuseRequests = 2; // on the next connection
    s.dropAll();
    s.append('project:P', 'y'); // replayed once the resubscribe is let in
    await waitFor(() => seen.length === 2, 3000, 'the replayed event');
    assert.equal(s.refused.length, 5);
    assert.deepEqual(ends, []);
  });

  it('resubscribes after a reconnect wait and retry, even with rateLimitRetries 0', async () => {
    const s = await server();
    const c = await client(s, { rateLimitRetries: 0 });
    /** @type {Array<Error|null>} */
    const ends = [];
    /** @type {number[][]} */
    const seen = [[], [], []];
    for (let i = 0; i < 3; i++) {
      await c.subscribe('project:P', { onEvent: (ev) => seen[i].push(ev.seq), onEnd: (err) => ends.push(err) });
    }
    s.refuseRequests = 4; // on the next connection
    s.dropAll();
    await waitFor(() => s.conns.length === 2 && s.last.subs.size === 3, 3000, 'every resubscribe');
    assert.equal(s.refused.length, 4);
    s.append('project:P', 'x');
    await waitFor(() => seen.every((l) => l.length === 1), 3000, 'the event on every subscription');
    assert.deepEqual(ends, []);
  });
});

describe('connections of one subject', () => {
  it('rejects the first connection with the LimitError', async () => {
    const s = await server();
    s.methods.auth = (conn, _p, msg) => {
      conn.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32029, message: 'limit exceeded', data: { limit: 'connections_per_subject', max: 2 } } });
      conn.ws.close(4029, 'too many connections');
      return undefined;
    };
    const c = new Client(s.url, { token: () => 't', WebSocket, logger: silent });
    await assert.rejects(c.connect(), (err) => isLimit(err, Limit.ConnectionsPerSubject) && /** @type {LimitError} */ (err).max === 2);
  });

  it('backs off near maxBackoff after 4029, logs it, and gets in once a place is free', async () => {
    const s = await server();
    const maxBackoff = 300;
    /** @type {string[]} */
    const warnings = [];
    /** @type {Error[]} */
    const errs = [];
    const c = await client(s, {
      maxBackoff,
      logger: { ...silent, warn: (/** @type {string} */ msg) => warnings.push(msg) },
      onStateChange: (st, err) => { if (st === 'reconnecting' && err) errs.push(err); },
    });
    /** @type {number[]} */
    const seen = [];
    await c.subscribe('project:P', { onEvent: (ev) => seen.push(ev.seq) });
    /** @type {number[]} */
    const attempts = [];
    s.methods.auth = (conn, _p, msg) => {
      attempts.push(Date.now());
      conn.send({ jsonrpc: '2.0', id: msg.id, error: { code: -32029, message: 'limit exceeded', data: { limit: 'connections_per_subject', max: 2 } } });
      conn.ws.close(4029, 'too many connections');
      return undefined;
    };
    const closedAt = Date.now();
    s.last.ws.close(4029, 'too many connections'); // as an established connection could be
    await waitFor(() => attempts.length >= 3, 5000, 'refused attempts');
    const gaps = [attempts[0] - closedAt, attempts[1] - attempts[0], attempts[2] - attempts[1]];
    assert.ok(gaps.every((g) => g >= maxBackoff / 2 - 5), `gaps ${gaps}`);
    assert.ok(errs.some((e) => isLimit(e, Limit.ConnectionsPerSubject)), errs.map(String).join('; '));
    assert.ok(warnings.some((w) => /too many connections of this subject/.test(w)), warnings.join('; '));
    delete s.methods.auth;
    await waitFor(() => c.state === 'connected', 3000, 'the reconnect');
    s.append('project:P', 'x');
    await waitFor(() => seen.length === 1, 3000, 'the event');
  });

  it('draws a long delay from the upper half of maxBackoff', () => {
    assert.equal(new Backoff(10, 200, () => 0).atCeiling(), 100);
    const b = new Backoff(10, 200, () => 0.9999);
    assert.equal(b.atCeiling(), 200);
    assert.equal(b.ceiling(), 200); // later delays stay at the ceiling
  });
});
