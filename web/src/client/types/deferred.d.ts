/**
 * @param {number} ms @param {Promise<any>} stop
 * @returns {Promise<boolean>} false when stop settled first
 */
export function sleep(ms: number, stop: Promise<any>): Promise<boolean>;
/**
 * A deferred promise that never counts as an unhandled rejection.
 * @template T
 */
export class Deferred<T> {
    /** @type {(v: T) => void} */
    resolve: (v: T) => void;
    /** @type {(e: any) => void} */
    reject: (e: any) => void;
    /** @type {Promise<T>} */
    promise: Promise<T>;
}
