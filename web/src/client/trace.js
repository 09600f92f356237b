// The trace context of a request, in its params._meta: how the OpenTelemetry
// conventions for JSON-RPC carry W3C Trace Context over one long-lived
// connection, so the server's spans of a request join the caller's trace.

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
export function withTraceContext(fn, method, params, logger) {
  if (!fn || typeof params !== 'object' || params === null || Array.isArray(params)) return params;
  let tc;
  try {
    tc = fn(method);
  } catch (err) {
    logger.warn('traceContext failed: the request goes without', { method, err });
    return params;
  }
  if (!tc || typeof tc.traceparent !== 'string' || tc.traceparent === '') return params;
  /** @type {TraceContext} */
  const meta = { traceparent: tc.traceparent };
  if (typeof tc.tracestate === 'string' && tc.tracestate !== '') meta.tracestate = tc.tracestate;
  return { ...params, _meta: meta };
}
