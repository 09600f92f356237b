// Reconnect delays: exponential growth from min up to max, with full jitter
// (a uniform draw between zero and the current ceiling) so that clients
// dropped together do not return together.

export class Backoff {
  /**
   * @param {number} min milliseconds
   * @param {number} max milliseconds
   * @param {() => number} [random] uniform in [0, 1)
   */
  constructor(min, max, random = Math.random) {
    this.min = min;
    this.max = Math.max(min, max);
    this.random = random;
    this.attempt = 0;
  }

  /** ceiling returns the upper bound of the next delay. */
  ceiling() {
    return this.attempt >= 32 ? this.max : Math.min(this.max, this.min * 2 ** this.attempt);
  }

  /** next returns the next delay in milliseconds and counts the attempt. */
  next() {
    const ceil = this.ceiling();
    this.attempt++;
    return Math.floor(this.random() * (ceil + 1));
  }

  /**
   * atCeiling returns a delay from the upper half of max, with jitter, and
   * keeps later delays at max: for a refusal that only time repairs.
   */
  atCeiling() {
    this.attempt = 32;
    const half = Math.floor(this.max / 2);
    return half + Math.floor(this.random() * (this.max - half + 1));
  }

  reset() {
    this.attempt = 0;
  }
}
