/**
 * heartbeats returns how often to send $/heartbeat and the interval of
 * which three silent ones end the connection, given the user's interval
 * and the server's heartbeat_ms (0 or undefined: not set). The server's
 * wins when the user set none. With both, heartbeats go out at the shorter
 * one (the server times out a client that sends less often than it
 * expects) and silence is measured in the longer one (the server sends
 * only every one of its intervals).
 * @param {number|undefined} user @param {number|undefined} server
 * @returns {[send: number, silence: number]}
 */
export function heartbeats(user: number | undefined, server: number | undefined): [send: number, silence: number];
/**
 * isRate reports whether a -32029's limit is a rate, whose refusals say
 * when to send the request again: the connection's requests, the
 * subject's requests, the subject's replays.
 * @param {string} limit
 */
export function isRate(limit: string): limit is "requests" | "subject_requests" | "replay";
/**
 * retryWait is the wait before sending a request refused for the rate
 * again: the server's retry_after_ms, plus jitter growing with the
 * attempts so that calls refused together do not all return together.
 * @param {number} afterMs @param {number} attempt @param {() => number} [random]
 */
export function retryWait(afterMs: number, attempt: number, random?: () => number): number;
/**
 * subscriptionLimit returns the LimitError that refuses one more
 * subscription when count already reaches the advertised limit, or null.
 * @param {Limits|null} limits @param {number} count
 * @returns {LimitError|null}
 */
export function subscriptionLimit(limits: Limits | null, count: number): LimitError | null;
/**
 * utf8Length is the length of text in bytes of UTF-8, as it is sent and as
 * the server counts planner_message_bytes.
 * @param {string} text
 */
export function utf8Length(text: string): number;
/**
 * plannerMessageLimit returns the LimitError that refuses a planner.send
 * text longer than the advertised planner_message_bytes, or null.
 * @param {Limits|null} limits @param {string} text
 * @returns {LimitError|null}
 */
export function plannerMessageLimit(limits: Limits | null, text: string): LimitError | null;
/**
 * isSubjectLimit reports whether err says that the subject has too many
 * connections: the auth refused with -32029, or a close with 4029.
 * @param {unknown} err
 */
export function isSubjectLimit(err: unknown): boolean;
/** @typedef {import('./wire.js').Limits} Limits what the server advertised in its auth result */
/** The heartbeat interval when neither the options nor the server say one: the spec's. */
export const DEFAULT_HEARTBEAT_MS: 15000;
/**
 * what the server advertised in its auth result
 */
export type Limits = import("./wire.js").Limits;
import { LimitError } from './errors.js';
