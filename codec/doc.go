// Package codec encodes and decodes JSON-RPC 2.0 envelopes for the two
// WebSocket subprotocols of the realtime API:
//
//   - ballet.v1.msgpack: binary frames, one MessagePack map per message (the default);
//   - ballet.v1.json: text frames, one JSON object per message.
//
// A Message keeps params, result and error data raw, in the codec's own
// format, until a method decodes them with Codec.Unmarshal. Both codecs use
// the same field names (json struct tags) and carry exactly the same meaning:
// integer ids, Unix-millisecond times as integers, objects as maps.
//
// Splice builds a notification whose params are a pre-encoded object with a
// "subscription" field added in front, so an event is encoded once per codec
// and never re-marshalled per subscriber.
package codec
