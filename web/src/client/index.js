// The browser client of the Ballet realtime API: JSON-RPC 2.0 over
// WebSocket, MessagePack by default, or over streaming HTTP (JSON) where a
// proxy refuses the WebSocket, with auth refresh, heartbeats, reconnects,
// gap-free resubscription, planner watches that resume where they were,
// and the server's advertised limits.

export { Client, dial } from './client.js';
export { Subscription } from './subscription.js';
export { Watch, Position } from './watch.js';
export { msgpack, json, codecFor } from './codec.js';
export { Backoff } from './backoff.js';
export { refreshDelay } from './conn.js';
export { WEBSOCKET_RETRY_MS } from './transport.js';
export { heartbeats, utf8Length } from './limits.js';
export {
  Code, CloseCode, Limit, RpcError, LimitError, ClosedError, ConnectionLostError, HeartbeatTimeoutError,
  SocketClosedError, ConnectTimeoutError, SubprotocolError, FrameError, StreamClosedError,
  OverflowError, errorCode,
} from './errors.js';

// The types of the public API, for TypeScript and editors (types/index.d.ts).
/** @typedef {import('./client.js').ClientOptions} ClientOptions */
/** @typedef {import('./client.js').CallOptions} CallOptions */
/** @typedef {import('./client.js').Logger} Logger */
/** @typedef {import('./client.js').State} State */
/** @typedef {import('./transport.js').TransportMode} TransportMode */
/** @typedef {import('./transport.js').Transport} Transport */
/** @typedef {import('./trace.js').TraceContext} TraceContext */
/** @typedef {import('./conn.js').Limits} Limits */
/** @typedef {import('./codec.js').Codec} Codec */
/** @typedef {import('./subscription.js').StreamEvent} StreamEvent */
/** @typedef {import('./subscription.js').Actor} Actor */
/** @typedef {import('./subscription.js').SubscribeOptions} SubscribeOptions */
/** @typedef {import('./watch.js').PlannerOutput} PlannerOutput */
/** @typedef {import('./watch.js').WatchOptions} WatchOptions */
/** @typedef {import('./watch.js').SendOptions} SendOptions */
// The wire's params and results (wire.js, generated from the server's Go types), by method.
/** @typedef {import('./wire.js').Methods} Methods */
