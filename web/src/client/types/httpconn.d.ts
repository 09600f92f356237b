/**
 * httpURL is the http(s) URL of a ws(s) URL (and an http(s) URL itself).
 * @param {string} url
 */
export function httpURL(url: string): string;
/**
 * tokenExpiry is the exp claim (Unix seconds) of a JWT, read without
 * checking it (the server checks it), or 0 when it has none.
 * @param {string} token
 */
export function tokenExpiry(token: string): any;
/**
 * @typedef {object} Exchange one POST and its response
 * @property {AbortController} ctl aborts its fetch
 * @property {number|undefined} id the request's id; undefined for a notification
 * @property {string} sub the subscription it opens, or ""
 * @property {boolean} done its last line came: the body may end now
 * @property {boolean} open its result came and its response stays open
 * @property {boolean} closed its fetch was ended by the client (unsubscribe)
 */
/** HttpConn is a connection emulated over POST /rpc: see the file's comment. */
export class HttpConn extends Link {
    /** @param {import('./conn.js').ConnOptions & {fetch: typeof fetch, readLimit: number}} o */
    constructor(o: import("./conn.js").ConnOptions & {
        fetch: typeof fetch;
        readLimit: number;
    });
    /** @type {'http'} */
    transport: "http";
    url: string;
    token: string;
    /** Aborts every fetch when the connection ends. */
    ctl: AbortController;
    /** @type {Map<string, Exchange>} the open exchanges, by subscription */
    subs: Map<string, Exchange>;
    /** How many responses are open past their result. */
    openCount: number;
    /**
     * handshake checks token with a system.ping (401: RpcError
     * Unauthenticated, as auth would answer) and answers as auth would: the
     * subject from the ping, expires_at from the token's exp, no limits (the
     * server advertises none over HTTP; the heartbeat interval comes in each
     * response's header).
     * @param {string} token
     * @param {number} timeoutMs
     * @returns {Promise<import('./wire.js').AuthResult>}
     */
    handshake(token: string, timeoutMs: number): Promise<import("./wire.js").AuthResult>;
    /** @param {any} msg */
    transmit(msg: any): void;
    /**
     * exchange POSTs msg and dispatches its response's lines in order.
     * @param {any} msg
     */
    exchange(msg: any): Promise<void>;
    /**
     * advertised takes the heartbeat interval a response's headers advertise
     * as the socket takes auth's heartbeat_ms: silence is three of the longer
     * of the server's and the client's.
     * @param {Headers} headers
     */
    advertised(headers: Headers): void;
    /**
     * finish forgets x; closing aborts its fetch too (unsubscribe).
     * @param {Exchange} x @param {boolean} closing
     */
    finish(x: Exchange, closing: boolean): void;
    /**
     * refused ends the connection for a POST refused before its body opened,
     * as the socket would have ended: 401 as close 4001 (the handshake
     * rejects with Unauthenticated, as auth would answer), 413 as 1009, anything
     * else (503, 429, a proxy's error) as a lost connection.
     * @param {Response} res @param {number|undefined} id
     */
    refused(res: Response, id: number | undefined): Promise<void>;
    /**
     * read dispatches body's NDJSON lines; a line longer than readLimit ends
     * the connection, and so does a body that ends before its last line.
     * @param {ReadableStream<Uint8Array>} body @param {Exchange} x
     */
    read(body: ReadableStream<Uint8Array>, x: Exchange): Promise<void>;
    /** @param {number} limit */
    tooLong(limit: number): void;
    /**
     * line serves one line of x's response.
     * @param {Exchange} x @param {Uint8Array} bytes
     */
    line(x: Exchange, bytes: Uint8Array): void;
    /** closeNormal ends every request of the connection. */
    closeNormal(): Promise<void>;
}
/**
 * one POST and its response
 */
export type Exchange = {
    /**
     * aborts its fetch
     */
    ctl: AbortController;
    /**
     * the request's id; undefined for a notification
     */
    id: number | undefined;
    /**
     * the subscription it opens, or ""
     */
    sub: string;
    /**
     * its last line came: the body may end now
     */
    done: boolean;
    /**
     * its result came and its response stays open
     */
    open: boolean;
    /**
     * its fetch was ended by the client (unsubscribe)
     */
    closed: boolean;
};
import { Link } from './conn.js';
