// The limits a server advertises in its auth result, and how the client
// keeps within them.

import { CloseCode, Limit, LimitError, SocketClosedError } from './errors.js';

/** @typedef {import('./wire.js').Limits} Limits what the server advertised in its auth result */

/** The heartbeat interval when neither the options nor the server say one: the spec's. */
export const DEFAULT_HEARTBEAT_MS = 15000;

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
export function heartbeats(user, server) {
  const u = user && user > 0 ? user : 0;
  const s = server && server > 0 ? server : 0;
  if (!u && !s) return [DEFAULT_HEARTBEAT_MS, DEFAULT_HEARTBEAT_MS];
  if (!u) return [s, s];
  if (!s) return [u, u];
  return [Math.min(u, s), Math.max(u, s)];
}

/**
 * isRate reports whether a -32029's limit is a rate, whose refusals say
 * when to send the request again: the connection's requests, the
 * subject's requests, the subject's replays.
 * @param {string} limit
 */
export function isRate(limit) {
  return limit === Limit.Requests || limit === Limit.SubjectRequests || limit === Limit.Replay;
}

/**
 * retryWait is the wait before sending a request refused for the rate
 * again: the server's retry_after_ms, plus jitter growing with the
 * attempts so that calls refused together do not all return together.
 * @param {number} afterMs @param {number} attempt @param {() => number} [random]
 */
export function retryWait(afterMs, attempt, random = Math.random) {
  const after = Math.max(afterMs, 1);
  return after + Math.floor(random() * (after * 2 ** Math.min(attempt, 3) + 1));
}

/**
 * subscriptionLimit returns the LimitError that refuses one more
 * subscription when count already reaches the advertised limit, or null.
 * @param {Limits|null} limits @param {number} count
 * @returns {LimitError|null}
 */
export function subscriptionLimit(limits, count) {
  const max = limits?.subscriptions;
  if (typeof max !== 'number' || max <= 0 || count < max) return null;
  return new LimitError(Limit.Subscriptions, max);
}

const utf8 = new TextEncoder();

/**
 * utf8Length is the length of text in bytes of UTF-8, as it is sent and as
 * the server counts planner_message_bytes.
 * @param {string} text
 */
export function utf8Length(text) {
  return utf8.encode(text).length;
}

/**
 * plannerMessageLimit returns the LimitError that refuses a planner.send
 * text longer than the advertised planner_message_bytes, or null.
 * @param {Limits|null} limits @param {string} text
 * @returns {LimitError|null}
 */
export function plannerMessageLimit(limits, text) {
  const max = limits?.planner_message_bytes;
  if (typeof max !== 'number' || max <= 0 || utf8Length(text) <= max) return null;
  return new LimitError(Limit.PlannerMessageBytes, max);
}

/**
 * isSubjectLimit reports whether err says that the subject has too many
 * connections: the auth refused with -32029, or a close with 4029.
 * @param {unknown} err
 */
export function isSubjectLimit(err) {
  return (err instanceof LimitError && err.limit === Limit.ConnectionsPerSubject)
    || (err instanceof SocketClosedError && err.closeCode === CloseCode.LimitExceeded);
}
