import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BoardModel, keyNumber, neighbour } from '../src/board/model.js';

/** @param {number} n @param {Partial<import('../src/board/model.js').Item>} [over] */
function item(n, over = {}) {
  return {
    key: `P-${n}`, id: `id-${n}`, project: 'P', number: n, title: `item ${n}`, description: '',
    state: 'backlog', version: 1, blocked_by: [], created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z', ...over,
  };
}

let seq = 0;
/**
 * @param {string} type @param {number} n @param {object} payload
 * @returns {import('../src/client/subscription.js').StreamEvent}
 */
function ev(type, n, payload, at = ++seq) {
  return {
    subscription: 's1', seq: at, type, entity_type: 'item', entity_id: `id-${n}`, entity_key: `P-${n}`,
    occurred_at: 1790000000000 + at, actor: { kind: 'human', subject: 'u' }, payload,
  };
}

describe('BoardModel', () => {
  it('holds events until the snapshot and applies only those after its seq', () => {
    const m = new BoardModel();
    m.beginLoad();
    const e1 = ev('item.created', 1, item(1), 10);
    const e2 = ev('item.state_changed', 1, { from: 'backlog', to: 'ready', version: 2 }, 11);
    const e3 = ev('item.created', 2, item(2), 12);
    for (const e of [e1, e2, e3]) assert.equal(m.applyEvent(e).changed.size, 0);
    const ch = m.loadSnapshot({ seq: 11, items: [item(1, { state: 'ready', version: 2 })] });
    assert.deepEqual([...ch.changed].sort(), ['P-1', 'P-2']);
    assert.equal(m.items.get('P-1')?.state, 'ready');
    assert.equal(m.items.get('P-2')?.version, 1);
    assert.equal(m.seq, 12);
  });

  it('applies each change once, whatever the order of REST answers and events', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(1)] });
    // The PATCH answer arrives first; its event later changes nothing.
    assert.equal(m.putItem(item(1, { state: 'ready', version: 2 })), true);
    const ch = m.applyEvent(ev('item.state_changed', 1, { from: 'backlog', to: 'ready', version: 2 }));
    assert.equal(ch.changed.size, 0);
    assert.equal(m.putItem(item(1, { state: 'backlog', version: 1 })), false); // a stale answer
    assert.equal(m.items.get('P-1')?.state, 'ready');
    // The same event again (a replay) is dropped by seq.
    const e = ev('item.updated', 1, { title: { from: 'item 1', to: 'renamed' }, version: 3 });
    assert.equal(m.applyEvent(e).changed.size, 1);
    assert.equal(m.applyEvent(e).changed.size, 0);
    assert.equal(m.items.get('P-1')?.title, 'renamed');
    assert.equal(m.items.get('P-1')?.version, 3);
  });

  it('applies both events of one write, which share its version', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(1)] });
    assert.equal(m.applyEvent(ev('item.updated', 1, { title: { from: 'item 1', to: 'renamed' }, version: 2 })).changed.size, 1);
    assert.equal(m.applyEvent(ev('item.state_changed', 1, { from: 'backlog', to: 'ready', version: 2 })).changed.size, 1);
    assert.deepEqual([m.items.get('P-1')?.title, m.items.get('P-1')?.state, m.items.get('P-1')?.version], ['renamed', 'ready', 2]);
  });

  it('applies the events after the first page of a snapshot loaded in pages', () => {
    const m = new BoardModel();
    m.beginLoad();
    // Page 1 (P-1, P-2) was read at seq 10, page 2 at seq 14: it shows P-5 after
    // events 11 and 12 and no longer has P-4 (changed at 13, deleted at 14).
    const held = [
      ev('item.updated', 5, { title: { from: 'item 5', to: 'renamed' }, version: 2 }, 11),
      ev('item.state_changed', 5, { from: 'backlog', to: 'ready', version: 2 }, 12),
      ev('item.updated', 4, { title: { from: 'item 4', to: 'x' }, version: 2 }, 13),
      ev('item.deleted', 4, { key: 'P-4', id: 'id-4', version: 2 }, 14),
      ev('item.state_changed', 5, { from: 'ready', to: 'done', version: 3 }, 15),
      ev('item.created', 6, item(6), 16),
    ];
    for (const e of held) m.applyEvent(e);
    const ch = m.loadSnapshot({ seq: 10, items: [item(1), item(2), item(5, { title: 'renamed', state: 'ready', version: 2 })] });
    assert.deepEqual([...m.items.keys()].sort(), ['P-1', 'P-2', 'P-5', 'P-6']);
    assert.deepEqual([m.items.get('P-5')?.title, m.items.get('P-5')?.state, m.items.get('P-5')?.version], ['renamed', 'done', 3]);
    assert.ok(ch.changed.has('P-5') && ch.changed.has('P-6'));
    assert.equal(m.seq, 16);
  });

  it('applies dependencies and keeps blockers sorted by number', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(1), item(2), item(10, { state: 'ready' })] });
    m.applyEvent(ev('dependency.added', 10, { blocker: 'P-2', blocked: 'P-10', version: 2 }));
    m.applyEvent(ev('dependency.added', 10, { blocker: 'P-1', blocked: 'P-10', version: 3 }));
    const it = /** @type {any} */ (m.items.get('P-10'));
    assert.deepEqual(it.blocked_by, ['P-1', 'P-2']);
    assert.deepEqual(m.openBlockers(it), ['P-1', 'P-2']);
    m.applyEvent(ev('item.state_changed', 1, { from: 'backlog', to: 'done', version: 2 }));
    assert.deepEqual(m.openBlockers(/** @type {any} */ (m.items.get('P-10'))), ['P-2']);
    m.applyEvent(ev('dependency.removed', 10, { blocker: 'P-2', blocked: 'P-10', version: 4 }));
    assert.deepEqual(m.items.get('P-10')?.blocked_by, ['P-1']);
  });

  it('asks to refetch an item whose version it cannot follow', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(1)] });
    const ch = m.applyEvent(ev('item.state_changed', 1, { from: 'ready', to: 'done', version: 5 }));
    assert.deepEqual([...ch.refetch], ['P-1']);
    assert.equal(m.items.get('P-1')?.state, 'backlog');
    const unknown = m.applyEvent(ev('item.updated', 9, { title: { from: 'a', to: 'b' }, version: 2 }));
    assert.deepEqual([...unknown.refetch], ['P-9']);
  });

  it('removes deleted items and passes other events on', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(1), item(2)] });
    const ch = m.applyEvent(ev('item.deleted', 2, { key: 'P-2', id: 'id-2', version: 1 }));
    assert.deepEqual([...ch.removed], ['P-2']);
    assert.equal(m.items.has('P-2'), false);
    const msg = m.applyEvent({ ...ev('planner.message', 0, { session: 'S', seq: 1, role: 'human' }), entity_type: 'planner_session', entity_key: null });
    assert.equal(msg.other.length, 1);
  });

  it('groups items into columns by number', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 0, items: [item(3, { state: 'done' }), item(2), item(1)] });
    const cols = m.columns();
    assert.deepEqual(cols.backlog.map((i) => i.key), ['P-1', 'P-2']);
    assert.deepEqual(cols.done.map((i) => i.key), ['P-3']);
    assert.deepEqual(cols.ready, []);
  });

  it('replaces the board with a new snapshot after a resync', () => {
    const m = new BoardModel();
    m.loadSnapshot({ seq: 5, items: [item(1), item(2)] });
    m.beginLoad();
    const ch = m.loadSnapshot({ seq: 20, items: [item(2, { version: 4, state: 'done' }), item(3)] });
    assert.deepEqual([...ch.removed], ['P-1']);
    assert.deepEqual([...ch.changed].sort(), ['P-2', 'P-3']);
    assert.equal(m.seq, 20);
  });
});

describe('helpers', () => {
  it('parses key numbers and neighbouring states', () => {
    assert.equal(keyNumber('WEB-42'), 42);
    assert.equal(keyNumber('A-B-7'), 7);
    assert.equal(neighbour('backlog', -1), null);
    assert.equal(neighbour('backlog', 1), 'ready');
    assert.equal(neighbour('in_progress', 1), 'done');
    assert.equal(neighbour('done', 1), null);
  });
});
