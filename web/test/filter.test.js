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

  it('follows who has each item open, apart from the board, and starts afresh at each resubscribe', async () => {
    const s = await new FakeServer().start();
    cleanups.push(() => s.stop());
    let n = 0;
    const c = new Client(s.url, { token: () => `tok-${++n}`, WebSocket, logger: silent, minBackoff: 5, maxBackoff: 20 });
    await c.connect();
    cleanups.push(() => c.close());
    /** @type {string[][]} */
    const board = [];
    /** @type {Array<Record<string, string[]>>} */
    const items = [];
    const sub = await c.subscribe('project:P', {
      onPresence: (p) => board.push(p),
      onItemPresence: (m) => items.push(Object.fromEntries(m)),
      onEvent: () => {},
    });
    const first = s.last.received.find((m) => m.method === 'stream.subscribe');
    assert.equal(first.params.presence, true);
    assert.equal(first.params.item_presence, true);
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'project:P', joined: [{ subject: 'alice' }], left: [] });
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'item:P-2', joined: [{ subject: 'bob' }], left: [] });
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'item:P-10', joined: [{ subject: 'carol' }, { subject: 'alice' }], left: [] });
    await waitFor(() => items.length === 2 && board.length === 1);
    assert.deepEqual(board[0], ['alice']);
    assert.deepEqual(items[1], { 'P-10': ['alice', 'carol'], 'P-2': ['bob'] });
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'item:P-2', joined: [], left: [{ subject: 'bob' }] });
    await waitFor(() => items.length === 3);
    assert.deepEqual(items[2], { 'P-10': ['alice', 'carol'] });
    assert.equal(board.length, 1, 'an item change is no board change');
    s.dropAll();
    await waitFor(() => s.conns.length >= 2 && s.last.received.some((m) => m.method === 'stream.subscribe'), 3000, 'resubscribe');
    // Forgotten at the resubscribe (nobody may have an item open now: no snapshot would say so).
    await waitFor(() => items.length === 4);
    assert.deepEqual(items[3], {});
    assert.equal(s.last.received.find((m) => m.method === 'stream.subscribe').params.item_presence, true);
    s.last.notify('presence.changed', { subscription: sub.id, stream: 'item:P-10', joined: [{ subject: 'carol' }], left: [] });
    await waitFor(() => items.length === 5);
    assert.deepEqual(items[4], { 'P-10': ['carol'] });
  });

  it('asks presence.get for the items', async () => {
    const s = await new FakeServer().start();
    cleanups.push(() => s.stop());
    s.methods['presence.get'] = (_conn, params) => ({ stream: params.stream, members: [], truncated: false, items: [], items_truncated: false });
    const c = new Client(s.url, { token: () => 'tok', WebSocket, logger: silent });
    await c.connect();
    cleanups.push(() => c.close());
    const res = await c.presenceGetItems('project:P');
    assert.deepEqual(res.items, []);
    assert.deepEqual(s.last.received.find((m) => m.method === 'presence.get').params, { stream: 'project:P', items: true });
  });
});
