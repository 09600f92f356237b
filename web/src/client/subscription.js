// Stream subscriptions, and what they share with planner watches: ids in
// the connection's subscription namespace that the client re-establishes
// after every reconnect.

import { ClosedError, Code, ConnectionLostError, OverflowError, RpcError, StreamClosedError } from './errors.js';

/**
 * @typedef {import('./wire.js').Actor} Actor who made the change
 * @typedef {import('./wire.js').EventParams} StreamEvent one stream.event: an event of the log
 *
 * @typedef {object} SubscribeOptions
 * @property {number} [fromSeq] Replay the stream's events after it first.
 *   Too old a fromSeq rejects with RpcError ResyncRequired.
 * @property {string[]} [types] Only events of these types, live and replayed:
 *   exact names ("dependency.added") or prefixes ending in "*" ("item.*").
 *   Seqs stay increasing, with gaps where events were left out; resuming
 *   after a reconnect keeps the filter.
 * @property {(present: string[]) => void} [onPresence] Makes the caller
 *   present on the stream while the subscription lives (presence, an
 *   extension), and is called with the subjects present, sorted, each time
 *   the list changes. The list starts afresh at each (re)subscribe: the
 *   server's snapshot follows.
 * @property {(items: Map<string, string[]>) => void} [onItemPresence] On a
 *   project stream: follows who has each of its items open (item presence,
 *   an extension: those subscribed to item:<KEY> with onPresence), without
 *   making the caller present anywhere. Called with every item that has
 *   someone present, by item key ("WEB-42"), each list sorted, each time it
 *   changes. It starts afresh at each (re)subscribe (called with an empty
 *   map if it was not): the server's snapshot follows.
 * @property {(ev: StreamEvent) => void} [onEvent] Each event, exactly once, in seq order.
 * @property {(seq: number) => void} [onResync] Called when, after a reconnect
 *   or a lagging close, the server can no longer replay from the last
 *   delivered seq (-32010). The client has subscribed again without from_seq;
 *   seq is the position it returned. Events after seq follow, none before
 *   onResync returns; events in between are missed: reload the snapshot and
 *   apply events idempotently. Without onResync such a subscription ends
 *   with that RpcError.
 * @property {(err: Error|null) => void} [onEnd] Called once when the
 *   subscription ends: null after unsubscribe, ClosedError after close(),
 *   StreamClosedError, or the error of a failed resubscribe.
 * @property {number} [buffer] Events held while the subscription is being
 *   re-established; more end it with OverflowError. Default 4096.
 * @property {AbortSignal} [signal] Abandons the first subscribe.
 */

/**
 * Entry is what subscriptions and watches share: an id on the client, the
 * connection the server serves it on, and delivery that can be held while
 * it is re-established.
 * @template T
 */
export class Entry {
  /**
   * @param {import('./client.js').Client} client
   * @param {string} id
   * @param {{onEnd?: (err: Error|null) => void, buffer?: number}} opts
   */
  constructor(client, id, opts) {
    this.client = client;
    this.id = id;
    this.onEnd = opts.onEnd;
    this.limit = opts.buffer ?? 4096;
    this.done = false;
    /** @type {Error|null} */
    this.error = null;
    this.gen = 0; // connection the server serves it on; 0 for none
    this.epoch = 0; // counts lagging closes, to detect one during a subscribe
    this.active = false; // the first subscribe succeeded: restore after gaps
    this.holding = false;
    /** @type {T[]} */
    this.held = [];
  }

  /** Why the subscription ended (null while it runs, and after unsubscribe). */
  get err() { return this.error; }

  /** unsubscribe ends the subscription; the server stops sending. */
  unsubscribe() {
    if (this.done) return Promise.resolve();
    return this.client.unsubscribe(this.id);
  }

  /** @param {number} gen */
  _needsRestore(gen) {
    return this.active && !this.done && this.gen !== gen;
  }

  /** @param {T} item @returns {void} */
  _emit(item) { void item; }

  /** @param {T} item */
  _offer(item) {
    if (!this.holding) {
      this._emit(item);
      return;
    }
    if (this.held.length >= this.limit) {
      this._fail(new OverflowError());
      return;
    }
    this.held.push(item);
  }

  _release() {
    const held = this.held;
    this.holding = false;
    this.held = [];
    for (const item of held) {
      if (this.done) return;
      this._emit(item);
    }
  }

  /**
   * _end ends delivery with err and returns the connection the server still
   * serves the subscription on (0 for none).
   * @param {Error|null} err
   */
  _end(err) {
    const gen = this.gen;
    this.gen = 0;
    if (this.done) return gen;
    this.done = true;
    this.error = err;
    this.held = [];
    this.holding = false;
    try {
      this.onEnd?.(err);
    } catch (e) {
      this.client.log.warn('onEnd failed', { subscription: this.id, err: String(e) });
    }
    return gen;
  }

  /**
   * _fail ends the subscription with err and forgets it, unsubscribing it
   * if the server may still serve it.
   * @param {Error} err
   */
  _fail(err) {
    const gen = this._end(err);
    if (this.client._subs.get(this.id) === this) this.client._subs.delete(this.id);
    const cn = this.client._cur;
    if (gen && cn && cn.gen === gen) {
      cn.request('stream.unsubscribe', { subscription: this.id }, { retries: Infinity }).catch(() => {});
    }
  }

  /**
   * _serverClosed handles stream.closed: lagging is repaired by subscribing
   * again from where the application is; any other reason ends it.
   * @param {number} gen @param {string} reason
   */
  _serverClosed(gen, reason) {
    if (this.done) return;
    if (reason === 'lagging') {
      if (this.gen === gen) this.gen = 0;
      this.epoch++;
      this.client._kick();
      return;
    }
    this.gen = 0;
    this._end(new StreamClosedError(this.id, reason));
    if (this.client._subs.get(this.id) === this) this.client._subs.delete(this.id);
  }

  /**
   * _settled records a successful subscribe on cn sent at epoch. It returns
   * false when the subscription ended meanwhile; the server's side is then
   * unsubscribed.
   * @param {import('./conn.js').Link} cn @param {number} epoch
   */
  _settled(cn, epoch) {
    if (this.done) {
      cn.request('stream.unsubscribe', { subscription: this.id }, { retries: Infinity }).catch(() => {});
      return false;
    }
    this.active = true;
    if (this.epoch === epoch) {
      this.gen = cn.gen;
    } else {
      this.client._kick(); // closed lagging while subscribing: again
    }
    return true;
  }

  /**
   * _patient are the request options of a resubscribe: after a reconnect
   * they come in a burst, so refusals for the request rate wait and are
   * sent again for as long as the connection lasts; each attempt is bounded
   * by callTimeout.
   */
  _patient() {
    return { retries: Infinity, timeout: this.client.o.callTimeout };
  }

  /**
   * _callFailed handles a resubscribe that got no answer: a connection that
   * still runs but does not answer in time is given up, so that the next
   * one restores the subscription. It returns false.
   * @param {import('./conn.js').Link} cn @param {unknown} err
   */
  _callFailed(cn, err) {
    if (!cn.error) cn.die(new ConnectionLostError(`resubscribe ${this.id} failed: ${String(err)}`, err), 4000);
    return false;
  }

  /**
   * _subscribeLoop makes the first subscribe, on the next connection again when
   * the connection ends before the answer.
   * @param {AbortSignal|undefined} signal
   * @param {(cn: import('./conn.js').Link) => Promise<void>} call sends the request and records its result
   */
  async _subscribeLoop(signal, call) {
    for (;;) {
      const cn = await this.client._waitConn(signal);
      const epoch = this.epoch;
      try {
        await call(cn);
      } catch (err) {
        if (err instanceof ConnectionLostError && !signal?.aborted && !this.client.closed) continue;
        if (!(err instanceof RpcError)) this.gen = cn.gen; // the server may have it
        throw err;
      }
      if (!this._settled(cn, epoch)) throw this.error ?? new ClosedError();
      this.client._kick(); // the connection may have been replaced meanwhile
      return;
    }
  }
}

/**
 * Subscription is a subscription to one change stream.
 * @extends {Entry<StreamEvent>}
 */
export class Subscription extends Entry {
  /**
   * @param {import('./client.js').Client} client
   * @param {string} id
   * @param {string} stream
   * @param {SubscribeOptions} opts
   */
  constructor(client, id, stream, opts) {
    super(client, id, opts);
    this.stream = stream;
    /** @type {string[]|undefined} */
    this.types = opts.types ? [...opts.types] : undefined;
    this.onPresence = opts.onPresence;
    /** Subjects present on the stream (with onPresence). @type {Set<string>} */
    this.present = new Set();
    this.onItemPresence = opts.onItemPresence;
    /** Subjects present on each item stream (with onItemPresence), by stream. @type {Map<string, Set<string>>} */
    this.itemsPresent = new Map();
    this.onEvent = opts.onEvent;
    this.onResync = opts.onResync;
    /** The log position the first subscribe returned. */
    this.seq = 0;
    /** The seq of the last event delivered, or the subscribe position: where the client resumes from. */
    this.lastSeq = 0;
    this.hasLast = false;
    if (opts.fromSeq !== undefined) {
      this.lastSeq = opts.fromSeq;
      this.hasLast = true;
    }
  }

  /** @param {AbortSignal|undefined} signal */
  _first(signal) {
    return this._subscribeLoop(signal, async (cn) => {
      const p = this._params();
      if (this.hasLast) p.from_seq = this.lastSeq;
      /** @type {{seq: number}} */
      const res = await cn.request('stream.subscribe', p, { signal, retries: this.client.o.rateLimitRetries });
      this.seq = res.seq;
      if (p.from_seq === undefined) this.lastSeq = Math.max(this.lastSeq, res.seq);
      this.hasLast = true;
    });
  }

  /**
   * _params are stream.subscribe's params, with the filter and presence when
   * asked for; with presence, the list starts afresh (the snapshot follows).
   * @param {number} [from]
   * @returns {{subscription: string, stream: string, from_seq?: number, types?: string[], presence?: boolean, item_presence?: boolean}}
   */
  _params(from) {
    /** @type {{subscription: string, stream: string, from_seq?: number, types?: string[], presence?: boolean, item_presence?: boolean}} */
    const p = { subscription: this.id, stream: this.stream };
    if (from !== undefined) p.from_seq = from;
    if (this.types) p.types = this.types;
    if (this.onPresence) {
      p.presence = true;
      this.present.clear();
    }
    if (this.onItemPresence) {
      p.item_presence = true;
      if (this.itemsPresent.size) {
        this.itemsPresent.clear();
        this._itemsChanged();
      }
    }
    return p;
  }

  /**
   * _presenceChanged applies a presence.changed notification.
   * @param {{stream?: string, joined?: Array<{subject: string}>, left?: Array<{subject: string}>}} ch
   */
  _presenceChanged(ch) {
    if (this.done) return;
    if (ch.stream !== undefined && ch.stream !== this.stream) {
      if (!this.onItemPresence || !ch.stream.startsWith('item:')) return;
      let set = this.itemsPresent.get(ch.stream);
      if (!set) {
        set = new Set();
        this.itemsPresent.set(ch.stream, set);
      }
      for (const j of ch.joined ?? []) set.add(j.subject);
      for (const l of ch.left ?? []) set.delete(l.subject);
      if (!set.size) this.itemsPresent.delete(ch.stream);
      this._itemsChanged();
      return;
    }
    if (!this.onPresence) return;
    for (const j of ch.joined ?? []) this.present.add(j.subject);
    for (const l of ch.left ?? []) this.present.delete(l.subject);
    try {
      this.onPresence([...this.present].sort());
    } catch (err) {
      this.client.log.warn('onPresence failed', { subscription: this.id, err: String(err) });
    }
  }

  /** _itemsChanged hands onItemPresence the items' lists. */
  _itemsChanged() {
    /** @type {Map<string, string[]>} */
    const items = new Map();
    for (const [stream, set] of [...this.itemsPresent].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
      items.set(stream.slice('item:'.length), [...set].sort());
    }
    try {
      this.onItemPresence?.(items);
    } catch (err) {
      this.client.log.warn('onItemPresence failed', { subscription: this.id, err: String(err) });
    }
  }

  /** @param {StreamEvent} ev */
  _deliver(ev) {
    if (this.done || (this.hasLast && ev.seq <= this.lastSeq)) return;
    this.lastSeq = ev.seq;
    this.hasLast = true;
    this._offer(ev);
  }

  /** @param {StreamEvent} ev */
  _emit(ev) {
    try {
      this.onEvent?.(ev);
    } catch (err) {
      this.client.log.warn('onEvent failed', { subscription: this.id, seq: ev.seq, err: String(err) });
    }
  }

  /**
   * _restore subscribes again on cn from the last delivered seq. It returns
   * false only when the connection is gone.
   * @param {import('./conn.js').Link} cn
   */
  async _restore(cn) {
    if (this.done || !this.active || this.gen === cn.gen) return true;
    const from = this.lastSeq;
    const epoch = this.epoch;
    try {
      await cn.request('stream.subscribe', this._params(from), this._patient());
      this._settled(cn, epoch);
      return true;
    } catch (err) {
      if (!(err instanceof RpcError)) return this._callFailed(cn, err);
      if (err.code === Code.ResyncRequired && this.onResync) return this._resync(cn);
      err.message = `resubscribe ${this.stream} from seq ${from}: ${err.message}`;
      this._fail(err);
      return true;
    }
  }

  /**
   * _resync subscribes without from_seq and runs onResync before any new
   * event is delivered.
   * @param {import('./conn.js').Link} cn
   */
  async _resync(cn) {
    const old = this.lastSeq;
    const epoch = this.epoch;
    this.holding = true;
    this.hasLast = false; // the log may have been reset: take what comes, filter below
    /** @type {{seq: number}} */
    let res;
    try {
      res = await cn.request('stream.subscribe', this._params(), this._patient());
    } catch (err) {
      this.holding = false;
      this.held = [];
      this.lastSeq = old;
      this.hasLast = true;
      if (!(err instanceof RpcError)) return this._callFailed(cn, err);
      err.message = `resubscribe ${this.stream}: ${err.message}`;
      this._fail(err);
      return true;
    }
    this.held = this.held.filter((ev) => ev.seq > res.seq);
    this.lastSeq = this.held.length ? this.held[this.held.length - 1].seq : res.seq;
    this.hasLast = true;
    if (!this._settled(cn, epoch)) return true;
    this.client.log.info('stream resync: events were missed', { subscription: this.id, stream: this.stream, lastDelivered: old, seq: res.seq });
    try {
      this.onResync?.(res.seq);
    } catch (err) {
      this.client.log.warn('onResync failed', { subscription: this.id, err: String(err) });
    }
    if (!this.done) this._release();
    return true;
  }
}
