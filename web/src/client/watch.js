// Planner watches that resume from the last output they delivered, and
// planner.send with an idempotency key, sent again after a lost answer.

import { ClosedError, ConnectionLostError, OverflowError, RpcError } from './errors.js';
import { plannerMessageLimit } from './limits.js';
import { Entry } from './subscription.js';

/**
 * @typedef {import('./wire.js').OutputParams} PlannerOutput one planner.output notification
 *
 * @typedef {object} WatchOptions
 * @property {(out: PlannerOutput) => void} [onOutput] The session's output,
 *   each once and in order, across reconnects.
 * @property {boolean} [fromTurnStart] Deliver a turn that is running when
 *   the watch starts from its start (its output so far first, then live),
 *   so that a view opened mid-answer shows the answer so far. By default
 *   only output from now on is delivered.
 * @property {(running: boolean) => void} [onResume] Called when output may
 *   have been missed: the watch was established again (after a reconnect, a
 *   lagging close or a gap in the output) and the server could not replay
 *   from the last output delivered (resumed: false, as when no turn runs,
 *   since one may have run meanwhile, and always from a server that does not
 *   resume). Reload the transcript. Runs before any new output. When the
 *   server resumes, the output goes on without a gap or a duplicate and
 *   onResume is not called. running tells whether a turn is in progress.
 * @property {(err: Error|null) => void} [onEnd] As for SubscribeOptions.
 * @property {number} [buffer] As for SubscribeOptions.
 * @property {AbortSignal} [signal] Abandons the first planner.watch.
 *
 * @typedef {object} SendOptions
 * @property {string} [idempotencyKey] Names the message (1–64 characters,
 *   unique per message of the session and subject for 24 hours): a send
 *   with a key the server has seen answers that send's seq and starts
 *   nothing. Default: a random key per call.
 * @property {AbortSignal} [signal] Abandons the send (also its repeats).
 */

/**
 * Position is where a watch is in its session's output, and the one place
 * that decides what to do with an output that arrives. Outputs are numbered
 * per turn (offset 1, 2, 3, …) and a turn starts only after the previous
 * one's done, so the next output is the next offset of the same turn or,
 * once it ended, offset 1 of another. Anything else was delivered already
 * (dropped) or comes after a hole (a gap: the watch is established again
 * from the position and the server replays what is missing).
 */
export class Position {
  constructor() {
    /** The turn of the last output delivered; "" before any. */
    this.turn = '';
    /** Its offset. */
    this.offset = 0;
    /** That output was the turn's done. */
    this.ended = false;
    /** The turn before turn, which has ended. */
    this.prev = '';
    /** Every output after the position is expected, so a jump is a gap. */
    this.synced = false;
    /** A turn whose start was missed after turn ended: resume it from 0. */
    this.next = '';
    /**
     * The server resumed from here and nothing was delivered since. The
     * gateway answers resumed: false when it cannot replay every output
     * after the position, but an older one could answer resumed for a turn
     * it kept too little of and then close the watch lagging at the hole;
     * asking such a server again would loop, so the next watch takes live
     * output only.
     */
    this.tried = false;
  }

  /**
   * check judges out: 'deliver', 'drop' or 'gap'.
   * @param {PlannerOutput} out
   * @returns {'deliver'|'drop'|'gap'}
   */
  check(out) {
    const turn = out.turn ?? '';
    const offset = out.offset ?? 0;
    if (turn === '') return 'deliver'; // a server that does not number outputs
    if (turn === this.turn) {
      if (offset <= this.offset) return 'drop';
      return offset === this.offset + 1 || !this.synced ? 'deliver' : 'gap';
    }
    if (turn === this.prev) return 'drop';
    if (!this.synced) return 'deliver';
    if (this.turn !== '' && !this.ended) return 'gap'; // the rest of this.turn is missing
    if (offset === 1) return 'deliver';
    this.next = turn;
    return 'gap';
  }

  /** @param {PlannerOutput} out delivered */
  advance(out) {
    if (!out.turn) return;
    if (out.turn !== this.turn) this.prev = this.turn;
    this.turn = out.turn;
    this.offset = out.offset ?? 0;
    this.ended = out.type === 'done';
    this.synced = true;
    this.next = '';
    this.tried = false;
  }

  /**
   * resumeFrom is what to watch again with: the rest of an unfinished
   * turn, a turn whose start was missed, or else the running turn from its
   * start; null after a resume that made no progress (live output only).
   * @returns {{turn?: string, after: number}|null}
   */
  resumeFrom() {
    if (this.tried) return null;
    if (this.turn && !this.ended) return { turn: this.turn, after: this.offset };
    if (this.next) return { turn: this.next, after: 0 };
    return { after: 0 };
  }

  /** @param {boolean} ok whether the server resumed */
  resumed(ok) {
    this.synced = ok;
    this.next = '';
    this.tried = ok;
  }
}

/**
 * Watch is a planner.watch: the output of one planner session. Across
 * reconnects, lagging closes and gaps it watches again from the last output
 * it delivered (turn and offset), so each output reaches onOutput once, in
 * order.
 * @extends {Entry<PlannerOutput>}
 */
export class Watch extends Entry {
  /**
   * @param {import('./client.js').Client} client
   * @param {string} id
   * @param {string} session
   * @param {WatchOptions} opts
   */
  constructor(client, id, session, opts) {
    super(client, id, opts);
    this.session = session;
    this.onOutput = opts.onOutput;
    this.onResume = opts.onResume;
    this.fromStart = !!opts.fromTurnStart;
    /** Whether a turn was in progress when the watch was last established. */
    this.running = false;
    this.pos = new Position();
    /** The connection whose server watch was given up for a gap: unsubscribe it first. */
    this.stale = 0;
  }

  /** The turn and offset of the last output delivered ("" and 0 before any). */
  get position() {
    return { turn: this.pos.turn, offset: this.pos.offset };
  }

  /**
   * _begin starts a planner.watch: outputs are held, unjudged, until its
   * answer says where they resume.
   * @param {boolean} resume
   */
  _begin(resume) {
    /** @type {{subscription: string, session: string, turn?: string, after?: number}} */
    const p = { subscription: this.id, session: this.session };
    const from = resume ? this.pos.resumeFrom() : null;
    if (from) Object.assign(p, from);
    this.holding = true;
    this.held = [];
    return p;
  }

  _abort() {
    this.holding = false;
    this.held = [];
  }

  /** @param {AbortSignal|undefined} signal */
  async _first(signal) {
    let gen = 0;
    await this._subscribeLoop(signal, async (cn) => {
      const p = this._begin(this.fromStart);
      /** @type {{running: boolean, resumed?: boolean}} */
      let res;
      try {
        res = await cn.request('planner.watch', p, { signal, retries: this.client.o.rateLimitRetries });
      } catch (err) {
        this._abort();
        throw err;
      }
      this.running = !!res.running;
      // From the start of the running turn every output is expected; a
      // running turn the server could not replay is taken from where it is.
      this.pos.resumed(this.fromStart && (res.resumed === true || (res.resumed === false && !res.running)));
      gen = cn.gen;
    });
    this._release(gen);
  }

  /**
   * _restore watches again on cn from the last output delivered; when the
   * server cannot resume from there, onResume runs before new output. It
   * returns false only when the connection is gone.
   * @param {import('./conn.js').Link} cn
   */
  async _restore(cn) {
    if (this.done || !this.active || this.gen === cn.gen) return true;
    if (this.stale === cn.gen) {
      // The id is still taken on the server: free it first (not found means
      // the server had ended that watch itself).
      try {
        await cn.request('stream.unsubscribe', { subscription: this.id }, this._patient());
      } catch (err) {
        if (!(err instanceof RpcError)) return this._callFailed(cn, err);
      }
      if (this.stale === cn.gen) this.stale = 0;
      if (this.done) return true;
    }
    const epoch = this.epoch;
    const p = this._begin(true);
    /** @type {{running: boolean, resumed?: boolean}} */
    let res;
    try {
      res = await cn.request('planner.watch', p, this._patient());
    } catch (err) {
      this._abort();
      if (!(err instanceof RpcError)) return this._callFailed(cn, err);
      err.message = `planner.watch ${this.session} again: ${err.message}`;
      this._fail(err);
      return true;
    }
    const resumed = res.resumed === true;
    this.running = !!res.running;
    this.pos.resumed(resumed);
    if (!this._settled(cn, epoch)) return true;
    if (!resumed) {
      this.client.log.info('planner watch: output may have been missed', {
        subscription: this.id, session: this.session, turn: p.turn, after: p.after, running: this.running,
      });
      try {
        this.onResume?.(this.running);
      } catch (err) {
        this.client.log.warn('onResume failed', { subscription: this.id, err: String(err) });
      }
    }
    if (!this.done) this._release(cn.gen);
    return true;
  }

  /**
   * @param {PlannerOutput} out
   * @param {number} gen the connection it came on
   */
  _deliver(out, gen) {
    if (this.done) return;
    if (!this.holding) {
      this._accept(out, gen);
      return;
    }
    if (this.held.length >= this.limit) {
      this._fail(new OverflowError());
      return;
    }
    this.held.push(out);
  }

  /**
   * _release ends holding and judges what was held.
   * @param {number} [gen]
   */
  _release(gen = 0) {
    const held = this.held;
    this._abort();
    for (const out of held) {
      if (this.done) return;
      this._accept(out, gen);
    }
  }

  /**
   * _accept hands out over when it is the next output, drops it when it was
   * delivered already, and after a gap has the watch established again.
   * @param {PlannerOutput} out @param {number} gen
   */
  _accept(out, gen) {
    switch (this.pos.check(out)) {
      case 'drop':
        return;
      case 'gap':
        this.client.log.debug('planner watch: a gap in the output: watching again', {
          subscription: this.id, turn: out.turn, offset: out.offset, lastTurn: this.pos.turn, lastOffset: this.pos.offset,
        });
        this.stale = gen;
        if (this.gen === gen) this.gen = 0;
        this.epoch++; // a planner.watch under way resumes from too early: again
        this.client._kick();
        return;
      default:
        this.pos.advance(out);
        this._emit(out);
    }
  }

  /** @param {PlannerOutput} out */
  _emit(out) {
    try {
      this.onOutput?.(out);
    } catch (err) {
      this.client.log.warn('onOutput failed', { subscription: this.id, err: String(err) });
    }
  }

  /**
   * _end ends delivery and returns the connection the server still serves
   * the watch on, also when it was given up for a gap.
   * @param {Error|null} err
   */
  _end(err) {
    const gen = super._end(err) || this.stale;
    this.stale = 0;
    return gen;
  }
}

/** newKey returns a random idempotency key (32 hex digits). */
export function newKey() {
  const b = new Uint8Array(16);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/**
 * plannerSend sends planner.send with an idempotency key, and again with
 * the same key on the next connection while the connection ends before the
 * answer: the message is stored and answered once.
 * @param {import('./client.js').Client} client
 * @param {string} session @param {string} text @param {SendOptions} [opts]
 * @returns {Promise<{seq: number}>}
 */
export async function plannerSend(client, session, text, opts = {}) {
  const params = { session, text, idempotency_key: opts.idempotencyKey || newKey() };
  for (;;) {
    const cn = await client._waitConn(opts.signal);
    // The limit of the connection the text would go on.
    const refused = plannerMessageLimit(cn.limits, text);
    if (refused) {
      refused.message = `planner.send: ${refused.message}`;
      throw refused;
    }
    try {
      return await cn.request('planner.send', params, { signal: opts.signal, retries: client.o.rateLimitRetries });
    } catch (err) {
      if (!(err instanceof ConnectionLostError)) throw err;
      if (client.closed) throw new ClosedError();
      if (opts.signal?.aborted) throw err;
      client.log.info('planner.send: connection lost before the answer: sending again', { session });
    }
  }
}
