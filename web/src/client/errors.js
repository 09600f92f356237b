// Errors of the client: JSON-RPC errors from the server carry their code;
// the client's own failures are classes of their own.

/** JSON-RPC error codes of the realtime API. */
export const Code = Object.freeze({
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  Unauthenticated: -32001,
  Forbidden: -32003,
  NotFound: -32004,
  Conflict: -32009,
  ResyncRequired: -32010,
});

/** WebSocket close codes of the realtime API. */
export const CloseCode = Object.freeze({
  Normal: 1000,
  GoingAway: 1001,
  UnsupportedData: 1003,
  PolicyViolation: 1008,
  TooBig: 1009,
  TryAgainLater: 1013,
  HeartbeatTimeout: 4000,
  Unauthenticated: 4001,
});

/** An error answered by the server; code is one of Code. */
export class RpcError extends Error {
  /**
   * @param {number} code
   * @param {string} message
   * @param {unknown} [data]
   */
  constructor(code, message, data) {
    super(message);
    this.name = 'RpcError';
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

/** The client was closed. */
export class ClosedError extends Error {
  constructor(message = 'client closed') {
    super(message);
    this.name = 'ClosedError';
  }
}

/**
 * A call's connection ended before the answer came; the request may or may
 * not have been processed.
 */
export class ConnectionLostError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message = 'connection lost', cause) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'ConnectionLostError';
  }
}

/** Nothing came from the server for three heartbeat intervals. */
export class HeartbeatTimeoutError extends Error {
  constructor() {
    super('heartbeat timeout');
    this.name = 'HeartbeatTimeoutError';
  }
}

/**
 * The WebSocket closed (or never opened); closeCode and reason are what the
 * close event said (1006 when the connection just failed).
 */
export class SocketClosedError extends Error {
  /** @param {number} closeCode @param {string} [reason] */
  constructor(closeCode, reason = '') {
    super(`websocket closed: ${closeCode}${reason ? ` ${reason}` : ''}`);
    this.name = 'SocketClosedError';
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** A connection attempt took longer than the connect timeout. */
export class ConnectTimeoutError extends Error {
  constructor() {
    super('connect timeout');
    this.name = 'ConnectTimeoutError';
  }
}

/** The server did not accept the codec's subprotocol. */
export class SubprotocolError extends Error {
  /** @param {string} offered */
  constructor(offered) {
    super(`subprotocol not accepted: ${offered} offered`);
    this.name = 'SubprotocolError';
  }
}

/** The server sent a frame of the other codec's kind (or an undecodable one). */
export class FrameError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'FrameError';
  }
}

/**
 * The server ended a subscription (stream.closed) with a reason other than
 * lagging: "forbidden" or "not_found". code matches the RpcError of the
 * same meaning.
 */
export class StreamClosedError extends Error {
  /** @param {string} subscription @param {string} reason */
  constructor(subscription, reason) {
    super(`subscription ${subscription} closed by the server: ${reason}`);
    this.name = 'StreamClosedError';
    this.subscription = subscription;
    this.reason = reason;
    this.code = reason === 'forbidden' ? Code.Forbidden : reason === 'not_found' ? Code.NotFound : undefined;
  }
}

/** A subscription held more events than its buffer while being re-established. */
export class OverflowError extends Error {
  constructor() {
    super('subscription buffer full');
    this.name = 'OverflowError';
  }
}

/**
 * errorCode returns the JSON-RPC code of err (an RpcError or a
 * StreamClosedError), or 0.
 * @param {unknown} err
 * @returns {number}
 */
export function errorCode(err) {
  const code = /** @type {any} */ (err)?.code;
  return typeof code === 'number' ? code : 0;
}
