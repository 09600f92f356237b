export class Backoff {
    /**
     * @param {number} min milliseconds
     * @param {number} max milliseconds
     * @param {() => number} [random] uniform in [0, 1)
     */
    constructor(min: number, max: number, random?: () => number);
    min: number;
    max: number;
    random: () => number;
    attempt: number;
    /** ceiling returns the upper bound of the next delay. */
    ceiling(): number;
    /** next returns the next delay in milliseconds and counts the attempt. */
    next(): number;
    /**
     * atCeiling returns a delay from the upper half of max, with jitter, and
     * keeps later delays at max: for a refusal that only time repairs.
     */
    atCeiling(): number;
    reset(): void;
}
