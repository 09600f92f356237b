import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';

import WebSocket from 'ws';

import { Client } from '../src/client/index.js';
import { FakeServer, silent, waitFor } from './fakeserver.js';

/** @type {Array<() => Promise<void>>} */
let cleanups = [];
afterEach(async () => {
  for (const f of cleanups.reverse()) await f();
  cleanups = [];
});

describe('types', () => {
  it('asks for the filter on subscribe and keeps it when it resumes', async () => {
    const s = await new FakeServer().start();
    cleanups.push(() => s.stop());
    let n = 0;
    const c = new Client(s.url, { token: () => `tok-${++n}`, WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20 });
    await c.connect();
    cleanups.push(() => c.close());
    const sub = await c.subscribe('project:P', { types: ['item.*', 'dependency.added'], onEvent: () => {} });
    const first = s.last.received.find((m) => m.method === 'stream.subscribe');
    assert.deepEqual(first.params, { subscription: sub.id, stream: 'project:P', types: ['item.*', 'dependency.added'] });
    s.dropAll();
    await waitFor(() => s.conns.length >= 2 && s.last.received.some((m) => m.method === 'stream.subscribe'), 3000, 'resubscribe');
    const again = s.last.received.find((m) => m.method === 'stream.subscribe');
    assert.deepEqual(again.params, { subscription: sub.id, stream: 'project:P', from_seq: 0, types: ['item.*', 'dependency.added'] });
  });
});

describe('presence', () => {
  it('follows presence.changed and starts afresh at each resubscribe', async () => {
    const s = await new FakeServer().start();
    cleanups.push(() => s.stop());
    let n = 0;
    const c = new Client(s.url, { token: () => `tok-${++n}`, WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20 });
    await c.connect();
    cleanups.push(() => c.close());
    /** @type {string[][]} */
    const seen = [];
    const sub = await c.subscribe('project:P', { onPresence: (p) => seen.push(p), onEvent: () => {} });
    const first = s.last.received.find((m) => m.method === 'stream.subscribe');
    assert.equal(first.params.presence, true);
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'project:P', joined: [{ subject: 'bob' }, { subject: 'alice' }], left: [] });
    await waitFor(() => seen.length === 1);
    assert.deepEqual(seen[0], ['alice', 'bob']);
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'project:P', joined: [{ subject: 'carol' }], left: [{ subject: 'bob' }] });
    await waitFor(() => seen.length === 2);
    assert.deepEqual(seen[1], ['alice', 'carol']);
    s.dropAll();
    await waitFor(() => s.conns.length >= 2 && s.last.received.some((m) => m.method === 'stream.subscribe'), 3000, 'resubscribe');
    // The new subscription's snapshot replaces the list.
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'project:P', joined: [{ subject: 'alice' }], left: [] });
    await waitFor(() => seen.length === 3);
    assert.deepEqual(seen[2], ['alice']);
    assert.equal(s.last.received.find((m) => m.method === 'stream.subscribe').params.presence, true);
  });
});
