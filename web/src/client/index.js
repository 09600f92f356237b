// The browser client of the Ballet realtime API: JSON-RPC 2.0 over
// WebSocket, MessagePack by default, with auth refresh, heartbeats,
// reconnects, gap-free resubscription, planner watches that resume where
// they were, and the server's advertised limits.

export { Client, dial } from './client.js';
export { Subscription } from './subscription.js';
export { Watch, Position } from './watch.js';
export { msgpack, json, codecFor } from './codec.js';
export { Backoff } from './backoff.js';
export { refreshDelay } from './conn.js';
export { heartbeats } from './limits.js';
export {
  Code, CloseCode, Limit, RpcError, LimitError, ClosedError, ConnectionLostError, HeartbeatTimeoutError,
  SocketClosedError, ConnectTimeoutError, SubprotocolError, FrameError, StreamClosedError,
  OverflowError, errorCode,
} from './errors.js';
