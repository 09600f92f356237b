/** newKey returns a random idempotency key (32 hex digits). */
export function newKey(): string;
/**
 * plannerSend sends planner.send with an idempotency key, and again with
 * the same key on the next connection while the connection ends before the
 * answer: the message is stored and answered once.
 * @param {import('./client.js').Client} client
 * @param {string} session @param {string} text @param {SendOptions} [opts]
 * @returns {Promise<{seq: number}>}
 */
export function plannerSend(client: import("./client.js").Client, session: string, text: string, opts?: SendOptions): Promise<{
    seq: number;
}>;
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
    /** The turn of the last output delivered; "" before any. */
    turn: string;
    /** Its offset. */
    offset: number;
    /** That output was the turn's done. */
    ended: boolean;
    /** The turn before turn, which has ended. */
    prev: string;
    /** Every output after the position is expected, so a jump is a gap. */
    synced: boolean;
    /** A turn whose start was missed after turn ended: resume it from 0. */
    next: string;
    /**
     * The server resumed from here and nothing was delivered since. The
     * gateway answers resumed: false when it cannot replay every output
     * after the position, but an older one could answer resumed for a turn
     * it kept too little of and then close the watch lagging at the hole;
     * asking such a server again would loop, so the next watch takes live
     * output only.
     */
    tried: boolean;
    /**
     * check judges out: 'deliver', 'drop' or 'gap'.
     * @param {PlannerOutput} out
     * @returns {'deliver'|'drop'|'gap'}
     */
    check(out: PlannerOutput): "deliver" | "drop" | "gap";
    /** @param {PlannerOutput} out delivered */
    advance(out: PlannerOutput): void;
    /**
     * resumeFrom is what to watch again with: the rest of an unfinished
     * turn, a turn whose start was missed, or else the running turn from its
     * start; null after a resume that made no progress (live output only).
     * @returns {{turn?: string, after: number}|null}
     */
    resumeFrom(): {
        turn?: string;
        after: number;
    } | null;
    /** @param {boolean} ok whether the server resumed */
    resumed(ok: boolean): void;
}
/**
 * Watch is a planner.watch: the output of one planner session. Across
 * reconnects, lagging closes and gaps it watches again from the last output
 * it delivered (turn and offset), so each output reaches onOutput once, in
 * order.
 * @extends {Entry<PlannerOutput>}
 */
export class Watch extends Entry<import("./wire.js").OutputParams> {
    /**
     * @param {import('./client.js').Client} client
     * @param {string} id
     * @param {string} session
     * @param {WatchOptions} opts
     */
    constructor(client: import("./client.js").Client, id: string, session: string, opts: WatchOptions);
    session: string;
    onOutput: ((out: PlannerOutput) => void) | undefined;
    onResume: ((running: boolean) => void) | undefined;
    fromStart: boolean;
    /** Whether a turn was in progress when the watch was last established. */
    running: boolean;
    pos: Position;
    /** The connection whose server watch was given up for a gap: unsubscribe it first. */
    stale: number;
    /** The turn and offset of the last output delivered ("" and 0 before any). */
    get position(): {
        turn: string;
        offset: number;
    };
    /**
     * _begin starts a planner.watch: outputs are held, unjudged, until its
     * answer says where they resume.
     * @param {boolean} resume
     */
    _begin(resume: boolean): {
        subscription: string;
        session: string;
        turn?: string;
        after?: number;
    };
    _abort(): void;
    /** @param {AbortSignal|undefined} signal */
    _first(signal: AbortSignal | undefined): Promise<void>;
    /**
     * _restore watches again on cn from the last output delivered; when the
     * server cannot resume from there, onResume runs before new output. It
     * returns false only when the connection is gone.
     * @param {import('./conn.js').Link} cn
     */
    _restore(cn: import("./conn.js").Link): Promise<boolean>;
    /**
     * @param {PlannerOutput} out
     * @param {number} gen the connection it came on
     */
    _deliver(out: PlannerOutput, gen: number): void;
    /**
     * _release ends holding and judges what was held.
     * @param {number} [gen]
     */
    _release(gen?: number): void;
    /**
     * _accept hands out over when it is the next output, drops it when it was
     * delivered already, and after a gap has the watch established again.
     * @param {PlannerOutput} out @param {number} gen
     */
    _accept(out: PlannerOutput, gen: number): void;
}
/**
 * one planner.output notification
 */
export type PlannerOutput = import("./wire.js").OutputParams;
export type WatchOptions = {
    /**
     * The session's output,
     * each once and in order, across reconnects.
     */
    onOutput?: ((out: PlannerOutput) => void) | undefined;
    /**
     * Deliver a turn that is running when
     * the watch starts from its start (its output so far first, then live),
     * so that a view opened mid-answer shows the answer so far. By default
     * only output from now on is delivered.
     */
    fromTurnStart?: boolean | undefined;
    /**
     * Called when output may
     * have been missed: the watch was established again (after a reconnect, a
     * lagging close or a gap in the output) and the server could not replay
     * from the last output delivered (resumed: false, as when no turn runs,
     * since one may have run meanwhile, and always from a server that does not
     * resume). Reload the transcript. Runs before any new output. When the
     * server resumes, the output goes on without a gap or a duplicate and
     * onResume is not called. running tells whether a turn is in progress.
     */
    onResume?: ((running: boolean) => void) | undefined;
    /**
     * As for SubscribeOptions.
     */
    onEnd?: ((err: Error | null) => void) | undefined;
    /**
     * As for SubscribeOptions.
     */
    buffer?: number | undefined;
    /**
     * Abandons the first planner.watch.
     */
    signal?: AbortSignal | undefined;
};
export type SendOptions = {
    /**
     * Names the message (1–64 characters,
     * unique per message of the session and subject for 24 hours): a send
     * with a key the server has seen answers that send's seq and starts
     * nothing. Default: a random key per call.
     */
    idempotencyKey?: string | undefined;
    /**
     * Abandons the send (also its repeats).
     */
    signal?: AbortSignal | undefined;
};
import { Entry } from './subscription.js';
