// The board's state: a project's items, loaded from a REST snapshot and
// kept current by stream events, applied idempotently by version.

/** The item states, in column order. */
export const STATES = /** @type {const} */ (['backlog', 'ready', 'in_progress', 'done']);

/** Column headings. */
export const STATE_LABELS = Object.freeze({
  backlog: 'Backlog',
  ready: 'Ready',
  in_progress: 'In progress',
  done: 'Done',
});

/**
 * @typedef {object} Item an item as REST shows it
 * @property {string} key
 * @property {string} id
 * @property {string} project
 * @property {number} number
 * @property {string} title
 * @property {string} description
 * @property {string} state
 * @property {number} version
 * @property {string[]} blocked_by
 * @property {string} created_at
 * @property {string} updated_at
 *
 * @typedef {object} Changes what applying events or a snapshot did
 * @property {Set<string>} changed keys of items added or changed
 * @property {Set<string>} removed keys of items removed
 * @property {Set<string>} refetch keys whose item must be loaded over REST:
 *   an event could not be applied to what the board holds
 * @property {import('../client/subscription.js').StreamEvent[]} other events
 *   that are not about items (planner messages, members, …)
 */

/** @returns {Changes} */
export function noChanges() {
  return { changed: new Set(), removed: new Set(), refetch: new Set(), other: [] };
}

/** @param {string} key @returns {number} the number after the last "-" */
export function keyNumber(key) {
  const n = Number(key.slice(key.lastIndexOf('-') + 1));
  return Number.isFinite(n) ? n : 0;
}

/** @param {string[]} keys */
function sortKeys(keys) {
  return [...new Set(keys)].sort((a, b) => keyNumber(a) - keyNumber(b));
}

/** How many events are held while a snapshot loads. */
const MAX_PENDING = 10000;

export class BoardModel {
  constructor() {
    /** @type {Map<string, Item>} */
    this.items = new Map();
    /** Whether a snapshot is loaded (events are applied) or loading (events are held). */
    this.loaded = false;
    /** @type {import('../client/subscription.js').StreamEvent[]} */
    this.pending = [];
    /** Set when held events overflowed: the snapshot must be loaded again. */
    this.overflowed = false;
    /** The log position the board reflects: the snapshot's seq, then each applied event's. */
    this.seq = 0;
  }

  /** beginLoad holds events until the next snapshot (step 2 of the client recipe). */
  beginLoad() {
    this.loaded = false;
    this.pending = [];
    this.overflowed = false;
  }

  /**
   * loadSnapshot replaces the items with a snapshot {seq, items} and applies
   * the events held meanwhile that it does not reflect (seq above its seq).
   * @param {{seq: number, items: Item[]}} snap
   * @returns {Changes}
   */
  loadSnapshot(snap) {
    const ch = noChanges();
    const next = new Map();
    for (const it of snap.items) {
      const cur = this.items.get(it.key);
      // A write answered over REST after the snapshot was read is newer.
      const keep = cur && cur.id === it.id && cur.version > it.version ? cur : normalize(it);
      next.set(it.key, keep);
      if (!cur || cur.version !== keep.version || cur.state !== keep.state) ch.changed.add(it.key);
    }
    for (const key of this.items.keys()) if (!next.has(key)) ch.removed.add(key);
    this.items = next;
    this.seq = snap.seq;
    this.loaded = true;
    const held = this.pending;
    this.pending = [];
    for (const ev of held) merge(ch, this.applyEvent(ev));
    return ch;
  }

  /**
   * applyEvent applies one stream event (step 3 of the client recipe).
   * Events the board already reflects (by seq, then by the item's version)
   * change nothing; an event that does not follow the item's version asks
   * for the item to be refetched.
   * @param {import('../client/subscription.js').StreamEvent} ev
   * @returns {Changes}
   */
  applyEvent(ev) {
    const ch = noChanges();
    if (!this.loaded) {
      if (this.pending.length >= MAX_PENDING) this.overflowed = true;
      else this.pending.push(ev);
      return ch;
    }
    if (ev.seq <= this.seq) return ch;
    this.seq = ev.seq;
    if (ev.entity_type !== 'item' || !ev.entity_key) {
      ch.other.push(ev);
      return ch;
    }
    const key = ev.entity_key;
    const p = ev.payload ?? {};
    const cur = this.items.get(key);
    const version = Number(p.version);
    switch (ev.type) {
      case 'item.created':
        if (this.putItem(/** @type {Item} */ (p))) ch.changed.add(key);
        return ch;
      case 'item.deleted':
        if (cur && !(cur.version > version)) {
          this.items.delete(key);
          ch.removed.add(key);
        }
        return ch;
      case 'item.updated':
      case 'item.state_changed':
      case 'dependency.added':
      case 'dependency.removed':
        break;
      default:
        ch.other.push(ev);
        return ch;
    }
    if (!cur || !Number.isFinite(version) || version > cur.version + 1) {
      ch.refetch.add(key);
      return ch;
    }
    // Below the item's version: already reflected. At it: the events of one
    // write share its version (item.updated, then item.state_changed), and a
    // page loaded after the first may already hold the write; each event says
    // what the item became, so it is applied again.
    if (version < cur.version) return ch;
    const it = { ...cur, version, updated_at: new Date(ev.occurred_at).toISOString() };
    switch (ev.type) {
      case 'item.updated':
        if (p.title) it.title = String(p.title.to);
        if (p.description) it.description = String(p.description.to);
        break;
      case 'item.state_changed':
        it.state = String(p.to);
        break;
      case 'dependency.added':
        it.blocked_by = sortKeys([...it.blocked_by, String(p.blocker)]);
        break;
      case 'dependency.removed':
        it.blocked_by = it.blocked_by.filter((k) => k !== p.blocker);
        break;
    }
    if (version === cur.version && it.title === cur.title && it.description === cur.description &&
      it.state === cur.state && it.blocked_by.join() === cur.blocked_by.join()) return ch; // held already
    this.items.set(key, it);
    ch.changed.add(key);
    return ch;
  }

  /**
   * putItem stores an item read over REST (or carried by item.created)
   * unless the board holds the same or a newer version.
   * @param {Item} item
   * @returns {boolean} whether it changed the board
   */
  putItem(item) {
    const cur = this.items.get(item.key);
    if (cur && cur.version >= item.version) return false;
    this.items.set(item.key, normalize(item));
    return true;
  }

  /** @param {string} key @returns {boolean} */
  removeItem(key) {
    return this.items.delete(key);
  }

  /**
   * columns returns the items of each state, by number.
   * @returns {Record<string, Item[]>}
   */
  columns() {
    /** @type {Record<string, Item[]>} */
    const cols = {};
    for (const s of STATES) cols[s] = [];
    for (const it of this.items.values()) (cols[it.state] ??= []).push(it);
    for (const s of Object.keys(cols)) cols[s].sort((a, b) => a.number - b.number);
    return cols;
  }

  /**
   * openBlockers returns the keys of the items blocking key that are not
   * done yet.
   * @param {Item} item
   */
  openBlockers(item) {
    return item.blocked_by.filter((k) => this.items.get(k)?.state !== 'done');
  }
}

/** @param {Item} it @returns {Item} */
function normalize(it) {
  return { ...it, number: it.number ?? keyNumber(it.key), blocked_by: sortKeys(it.blocked_by ?? []) };
}

/** @param {Changes} into @param {Changes} from */
export function merge(into, from) {
  for (const k of from.changed) {
    into.changed.add(k);
    into.removed.delete(k);
    into.refetch.delete(k);
  }
  for (const k of from.removed) {
    into.removed.add(k);
    into.changed.delete(k);
    into.refetch.delete(k);
  }
  for (const k of from.refetch) into.refetch.add(k);
  into.other.push(...from.other);
  return into;
}

/**
 * neighbour returns the state before (-1) or after (+1) state, or null.
 * @param {string} state @param {-1|1} dir
 */
export function neighbour(state, dir) {
  const i = STATES.indexOf(/** @type {any} */ (state));
  if (i < 0) return null;
  return STATES[i + dir] ?? null;
}
