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
export class Entry<T> {
    /**
     * @param {import('./client.js').Client} client
     * @param {string} id
     * @param {{onEnd?: (err: Error|null) => void, buffer?: number}} opts
     */
    constructor(client: import("./client.js").Client, id: string, opts: {
        onEnd?: (err: Error | null) => void;
        buffer?: number;
    });
    client: import("./client.js").Client;
    id: string;
    onEnd: ((err: Error | null) => void) | undefined;
    limit: number;
    done: boolean;
    /** @type {Error|null} */
    error: Error | null;
    gen: number;
    epoch: number;
    active: boolean;
    holding: boolean;
    /** @type {T[]} */
    held: T[];
    /** Why the subscription ended (null while it runs, and after unsubscribe). */
    get err(): Error | null;
    /** unsubscribe ends the subscription; the server stops sending. */
    unsubscribe(): Promise<void>;
    /** @param {number} gen */
    _needsRestore(gen: number): boolean;
    /** @param {T} item @returns {void} */
    _emit(item: T): void;
    /** @param {T} item */
    _offer(item: T): void;
    _release(): void;
    /**
     * _end ends delivery with err and returns the connection the server still
     * serves the subscription on (0 for none).
     * @param {Error|null} err
     */
    _end(err: Error | null): number;
    /**
     * _fail ends the subscription with err and forgets it, unsubscribing it
     * if the server may still serve it.
     * @param {Error} err
     */
    _fail(err: Error): void;
    /**
     * _serverClosed handles stream.closed: lagging is repaired by subscribing
     * again from where the application is; any other reason ends it.
     * @param {number} gen @param {string} reason
     */
    _serverClosed(gen: number, reason: string): void;
    /**
     * _settled records a successful subscribe on cn sent at epoch. It returns
     * false when the subscription ended meanwhile; the server's side is then
     * unsubscribed.
     * @param {import('./conn.js').Link} cn @param {number} epoch
     */
    _settled(cn: import("./conn.js").Link, epoch: number): boolean;
    /**
     * _patient are the request options of a resubscribe: after a reconnect
     * they come in a burst, so refusals for the request rate wait and are
     * sent again for as long as the connection lasts; each attempt is bounded
     * by callTimeout.
     */
    _patient(): {
        retries: number;
        timeout: number;
    };
    /**
     * _callFailed handles a resubscribe that got no answer: a connection that
     * still runs but does not answer in time is given up, so that the next
     * one restores the subscription. It returns false.
     * @param {import('./conn.js').Link} cn @param {unknown} err
     */
    _callFailed(cn: import("./conn.js").Link, err: unknown): boolean;
    /**
     * _subscribeLoop makes the first subscribe, on the next connection again when
     * the connection ends before the answer.
     * @param {AbortSignal|undefined} signal
     * @param {(cn: import('./conn.js').Link) => Promise<void>} call sends the request and records its result
     */
    _subscribeLoop(signal: AbortSignal | undefined, call: (cn: import("./conn.js").Link) => Promise<void>): Promise<void>;
}
/**
 * Subscription is a subscription to one change stream.
 * @extends {Entry<StreamEvent>}
 */
export class Subscription extends Entry<import("./wire.js").EventParams> {
    /**
     * @param {import('./client.js').Client} client
     * @param {string} id
     * @param {string} stream
     * @param {SubscribeOptions} opts
     */
    constructor(client: import("./client.js").Client, id: string, stream: string, opts: SubscribeOptions);
    stream: string;
    /** @type {string[]|undefined} */
    types: string[] | undefined;
    onPresence: ((present: string[]) => void) | undefined;
    /** Subjects present on the stream (with onPresence). @type {Set<string>} */
    present: Set<string>;
    onItemPresence: ((items: Map<string, string[]>) => void) | undefined;
    /** Subjects present on each item stream (with onItemPresence), by stream. @type {Map<string, Set<string>>} */
    itemsPresent: Map<string, Set<string>>;
    onEvent: ((ev: StreamEvent) => void) | undefined;
    onResync: ((seq: number) => void) | undefined;
    /** The log position the first subscribe returned. */
    seq: number;
    /** The seq of the last event delivered, or the subscribe position: where the client resumes from. */
    lastSeq: number;
    hasLast: boolean;
    /** @param {AbortSignal|undefined} signal */
    _first(signal: AbortSignal | undefined): Promise<void>;
    /**
     * _params are stream.subscribe's params, with the filter and presence when
     * asked for; with presence, the list starts afresh (the snapshot follows).
     * @param {number} [from]
     * @returns {{subscription: string, stream: string, from_seq?: number, types?: string[], presence?: boolean, item_presence?: boolean}}
     */
    _params(from?: number): {
        subscription: string;
        stream: string;
        from_seq?: number;
        types?: string[];
        presence?: boolean;
        item_presence?: boolean;
    };
    /**
     * _presenceChanged applies a presence.changed notification.
     * @param {{stream?: string, joined?: Array<{subject: string}>, left?: Array<{subject: string}>}} ch
     */
    _presenceChanged(ch: {
        stream?: string;
        joined?: Array<{
            subject: string;
        }>;
        left?: Array<{
            subject: string;
        }>;
    }): void;
    /** _itemsChanged hands onItemPresence the items' lists. */
    _itemsChanged(): void;
    /** @param {StreamEvent} ev */
    _deliver(ev: StreamEvent): void;
    /**
     * _restore subscribes again on cn from the last delivered seq. It returns
     * false only when the connection is gone.
     * @param {import('./conn.js').Link} cn
     */
    _restore(cn: import("./conn.js").Link): Promise<boolean>;
    /**
     * _resync subscribes without from_seq and runs onResync before any new
     * event is delivered.
     * @param {import('./conn.js').Link} cn
     */
    _resync(cn: import("./conn.js").Link): Promise<boolean>;
}
/**
 * who made the change
 */
export type Actor = import("./wire.js").Actor;
/**
 * one stream.event: an event of the log
 */
export type StreamEvent = import("./wire.js").EventParams;
export type SubscribeOptions = {
    /**
     * Replay the stream's events after it first.
     * Too old a fromSeq rejects with RpcError ResyncRequired.
     */
    fromSeq?: number | undefined;
    /**
     * Only events of these types, live and replayed:
     * exact names ("dependency.added") or prefixes ending in "*" ("item.*").
     * Seqs stay increasing, with gaps where events were left out; resuming
     * after a reconnect keeps the filter.
     */
    types?: string[] | undefined;
    /**
     * Makes the caller
     * present on the stream while the subscription lives (presence, an
     * extension), and is called with the subjects present, sorted, each time
     * the list changes. The list starts afresh at each (re)subscribe: the
     * server's snapshot follows.
     */
    onPresence?: ((present: string[]) => void) | undefined;
    /**
     * On a
     * project stream: follows who has each of its items open (item presence,
     * an extension: those subscribed to item:<KEY> with onPresence), without
     * making the caller present anywhere. Called with every item that has
     * someone present, by item key ("WEB-42"), each list sorted, each time it
     * changes. It starts afresh at each (re)subscribe (called with an empty
     * map if it was not): the server's snapshot follows.
     */
    onItemPresence?: ((items: Map<string, string[]>) => void) | undefined;
    /**
     * Each event, exactly once, in seq order.
     */
    onEvent?: ((ev: StreamEvent) => void) | undefined;
    /**
     * Called when, after a reconnect
     * or a lagging close, the server can no longer replay from the last
     * delivered seq (-32010). The client has subscribed again without from_seq;
     * seq is the position it returned. Events after seq follow, none before
     * onResync returns; events in between are missed: reload the snapshot and
     * apply events idempotently. Without onResync such a subscription ends
     * with that RpcError.
     */
    onResync?: ((seq: number) => void) | undefined;
    /**
     * Called once when the
     * subscription ends: null after unsubscribe, ClosedError after close(),
     * StreamClosedError, or the error of a failed resubscribe.
     */
    onEnd?: ((err: Error | null) => void) | undefined;
    /**
     * Events held while the subscription is being
     * re-established; more end it with OverflowError. Default 4096.
     */
    buffer?: number | undefined;
    /**
     * Abandons the first subscribe.
     */
    signal?: AbortSignal | undefined;
};
