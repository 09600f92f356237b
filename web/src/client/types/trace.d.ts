/**
 * @typedef {object} TraceContext
 * @property {string} traceparent the W3C traceparent of the caller's span
 * @property {string} [tracestate] its W3C tracestate
 */
/**
 * withTraceContext returns params with the trace context that fn returns
 * for method in params._meta, or params themselves when fn is unset,
 * returns nothing usable, or throws (logged), or when params are not an
 * object. params are not changed.
 * @param {((method: string) => (TraceContext|null|undefined)) | undefined} fn
 * @param {string} method
 * @param {any} params
 * @param {{warn: Function}} logger
 * @returns {any}
 */
export function withTraceContext(fn: ((method: string) => (TraceContext | null | undefined)) | undefined, method: string, params: any, logger: {
    warn: Function;
}): any;
export type TraceContext = {
    /**
     * the W3C traceparent of the caller's span
     */
    traceparent: string;
    /**
     * its W3C tracestate
     */
    tracestate?: string | undefined;
};
