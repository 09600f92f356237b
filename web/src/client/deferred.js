// Promises the client waits on.

/**
 * A deferred promise that never counts as an unhandled rejection.
 * @template T
 */
export class Deferred {
  constructor() {
    /** @type {(v: T) => void} */
    this.resolve = () => {};
    /** @type {(e: any) => void} */
    this.reject = () => {};
    /** @type {Promise<T>} */
    this.promise = new Promise((res, rej) => { this.resolve = res; this.reject = rej; });
    this.promise.catch(() => {});
  }
}

/**
 * @param {number} ms @param {Promise<any>} stop
 * @returns {Promise<boolean>} false when stop settled first
 */
export function sleep(ms, stop) {
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(true), ms);
    stop.then(() => { clearTimeout(t); resolve(false); }, () => { clearTimeout(t); resolve(false); });
  });
}
