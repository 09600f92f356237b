import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import WebSocket from 'ws';

import { Client, Position } from '../src/client/index.js';
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

/** @param {FakeServer} s @param {string} [codec] */
async function client(s, codec = 'msgpack') {
  const c = new Client(s.url, {
    token: () => 'tok', WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20, codec: /** @type {any} */ (codec),
  });
  await c.connect();
  cleanups.push(() => c.close());
  return c;
}

/**
 * watcher records what a watch delivers: outputs as "offset:text" and
 * onResume calls as "resume:running".
 */
function watcher() {
  /** @type {string[]} */
  const log = [];
  return {
    log,
    text: () => log.filter((e) => !e.startsWith('resume')).map((e) => e.split(':')[1]).join(''),
    onOutput: (/** @type {any} */ o) => log.push(`${o.offset}:${o.text ?? ''}`),
    onResume: (/** @type {boolean} */ running) => log.push(`resume:${running}`),
  };
}

/** @param {FakeServer} s @param {string} id the watches' planner.watch params, without the session */
function watchParams(s, id) {
  return s.requests('planner.watch').filter((m) => m.params.subscription === id).map((m) => {
    const { session: _, subscription: __, ...rest } = m.params;
    return rest;
  });
}

describe('planner watches resume', () => {
  for (const codec of ['msgpack', 'json']) {
    it(`from the last output after a dropped connection, each output once (${codec})`, async () => {
      const s = await server();
      const c = await client(s, codec);
      const w = watcher();
      const watch = await c.plannerWatch('S1', w);
      await c.plannerSend('S1', 'tell me');
      for (const t of ['a', 'b', 'c']) s.output('S1', { type: 'text', text: t });
      await waitFor(() => w.log.length === 3);
      s.dropAll();
      for (const t of ['d', 'e']) s.output('S1', { type: 'text', text: t }, { send: false });
      await waitFor(() => w.log.length === 5, 3000, 'the replay');
      s.output('S1', { type: 'text', text: 'f' });
      s.output('S1', { type: 'done', text: 'end_turn' });
      await waitFor(() => w.log.length === 7);
      assert.deepEqual(w.log, ['1:a', '2:b', '3:c', '4:d', '5:e', '6:f', '7:end_turn']);
      assert.deepEqual(watchParams(s, watch.id), [{}, { turn: 'T1', after: 3 }]);
      assert.deepEqual(watch.position, { turn: 'T1', offset: 7 });
    });
  }

  it('after a lagging close, from the last output', async () => {
    const s = await server();
    const c = await client(s);
    const w = watcher();
    const watch = await c.plannerWatch('S1', w);
    s.output('S1', { type: 'text', text: 'a' });
    await waitFor(() => w.log.length === 1);
    s.output('S1', { type: 'text', text: 'b' }, { send: false });
    s.last.subs.delete(watch.id);
    s.last.notify('stream.closed', { subscription: watch.id, reason: 'lagging' });
    await waitFor(() => w.log.length === 2, 3000, 'the replay');
    assert.deepEqual(w.log, ['1:a', '2:b']);
    assert.deepEqual(watchParams(s, watch.id), [{}, { turn: 'T1', after: 1 }]);
  });

  it('repairs a gap: unsubscribes, watches again from before it, drops what it has', async () => {
    const s = await server();
    const c = await client(s);
    const w = watcher();
    const watch = await c.plannerWatch('S1', w);
    s.output('S1', { type: 'text', text: 'a' });
    const b = s.output('S1', { type: 'text', text: 'b' });
    s.sendOutput(b); // a duplicate
    s.output('S1', { type: 'text', text: 'c' }, { send: false }); // lost
    s.output('S1', { type: 'text', text: 'd' });
    s.output('S1', { type: 'done', text: '' });
    await waitFor(() => w.log.length === 5, 3000, 'the repair');
    assert.equal(w.text(), 'abcd');
    // The start of the next turn is lost.
    s.output('S1', { type: 'message', text: 'x' }, { send: false });
    s.output('S1', { type: 'text', text: 'y' });
    await waitFor(() => w.log.length === 7, 3000, 'the second repair');
    assert.deepEqual(w.log.slice(5), ['1:x', '2:y']);
    const reqs = s.last.received.filter((m) => m.method === 'stream.unsubscribe' || m.method === 'planner.watch')
      .map((m) => `${m.method} ${m.params.turn ?? ''} ${m.params.after ?? ''}`.trim());
    assert.deepEqual(reqs, [
      'planner.watch', 'stream.unsubscribe', 'planner.watch T1 2', 'stream.unsubscribe', 'planner.watch T2 0',
    ]);
    assert.equal(watch.err, null);
  });

  it('fromTurnStart delivers the running turn from its start', async () => {
    const s = await server();
    const c = await client(s);
    s.output('S1', { type: 'text', text: 'a' });
    s.output('S1', { type: 'text', text: 'b' });
    const w = watcher();
    const watch = await c.plannerWatch('S1', { ...w, fromTurnStart: true });
    assert.equal(watch.running, true);
    s.output('S1', { type: 'text', text: 'c' });
    await waitFor(() => w.log.length === 3);
    assert.deepEqual(w.log, ['1:a', '2:b', '3:c']);
    assert.deepEqual(watchParams(s, watch.id), [{ after: 0 }]);
  });

  it('calls onResume once when the server cannot resume, and takes the output from where it is', async () => {
    const s = await server();
    const c = await client(s);
    const w = watcher();
    const watch = await c.plannerWatch('S1', w);
    s.output('S1', { type: 'text', text: 'a' });
    await waitFor(() => w.log.length === 1);
    s.forgotten.add('T1');
    s.dropAll();
    s.output('S1', { type: 'text', text: 'b' }, { send: false });
    await waitFor(() => w.log.length === 2, 3000, 'onResume');
    s.output('S1', { type: 'text', text: 'c' });
    await waitFor(() => w.log.length === 3);
    assert.deepEqual(w.log, ['1:a', 'resume:true', '3:c']);
    assert.deepEqual(watchParams(s, watch.id), [{}, { turn: 'T1', after: 1 }]);
  });

  it('does not ask again from where a resume made no progress', () => {
    const p = new Position();
    p.resumed(false);
    p.advance(/** @type {any} */ ({ turn: 'T1', offset: 4, type: 'text' }));
    assert.deepEqual(p.resumeFrom(), { turn: 'T1', after: 4 });
    p.resumed(true);
    assert.equal(p.resumeFrom(), null, 'no output since the server said resumed');
    p.resumed(false);
    assert.equal(p.check(/** @type {any} */ ({ turn: 'T1', offset: 9, type: 'text' })), 'deliver');
  });
});

describe('planner.send', () => {
  it('carries a random key, or the one given', async () => {
    const s = await server();
    const c = await client(s);
    await c.plannerSend('S1', 'one');
    s.sessions.set('S1', false);
    await c.plannerSend('S1', 'two', { idempotencyKey: 'msg-2' });
    const keys = s.requests('planner.send').map((m) => m.params.idempotency_key);
    assert.match(keys[0], /^[0-9a-f]{32}$/);
    assert.equal(keys[1], 'msg-2');
  });

  it('is sent again with the same key when the answer is lost, and counts once', async () => {
    const s = await server();
    const c = await client(s);
    s.loseAnswers['planner.send'] = 1;
    const { seq } = await c.plannerSend('S1', 'tell me');
    assert.equal(seq, 1);
    const sends = s.requests('planner.send');
    assert.equal(sends.length, 2);
    assert.equal(sends[0].params.idempotency_key, sends[1].params.idempotency_key);
    assert.equal(s.conns.length, 2);
    assert.equal(s.nextTurn, 1, 'one turn');
  });

  it('a server without idempotency keys still answers -32009 to a second send', async () => {
    const s = await server({ resume: false });
    const c = await client(s);
    await c.plannerSend('S1', 'one', { idempotencyKey: 'k' });
    await assert.rejects(c.plannerSend('S1', 'one', { idempotencyKey: 'k' }), (/** @type {any} */ err) => err.code === -32009);
  });
});
