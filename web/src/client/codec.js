// Codecs of the realtime API: one JSON-RPC 2.0 message per WebSocket frame,
// MessagePack in binary frames (the default) or JSON in text frames.

import { Decoder, Encoder } from '@msgpack/msgpack';

/**
 * @typedef {object} Codec
 * @property {string} name the WebSocket subprotocol
 * @property {boolean} binary whether frames are binary (else text)
 * @property {(msg: object) => (Uint8Array|string)} encode
 * @property {(frame: ArrayBuffer|Uint8Array|string) => any} decode throws on a malformed frame
 */

// Objects are maps, undefined fields are left out (as omitempty in Go), and
// integers take their smallest encoding.
const encoder = new Encoder({ ignoreUndefined: true });
const decoder = new Decoder();

/** @type {Codec} */
export const msgpack = Object.freeze({
  name: 'ballet.v1.msgpack',
  binary: true,
  encode: (msg) => encoder.encode(msg),
  decode(frame) {
    if (typeof frame === 'string') throw new TypeError('a text frame on ballet.v1.msgpack');
    return decoder.decode(frame instanceof ArrayBuffer ? new Uint8Array(frame) : frame);
  },
});

const textDecoder = new TextDecoder('utf-8', { fatal: true });

/** @type {Codec} */
export const json = Object.freeze({
  name: 'ballet.v1.json',
  binary: false,
  encode: (msg) => JSON.stringify(msg),
  decode(frame) {
    if (typeof frame !== 'string') {
      // Node's WebSocket implementations may hand text frames over as bytes.
      if (!(frame instanceof Uint8Array || frame instanceof ArrayBuffer)) throw new TypeError('not a frame');
      frame = textDecoder.decode(frame);
    }
    return JSON.parse(frame);
  },
});

/**
 * codecFor returns the codec named "msgpack" or "json" (or by subprotocol),
 * or the codec itself.
 * @param {string|Codec|undefined} c
 * @returns {Codec}
 */
export function codecFor(c) {
  if (c === undefined || c === 'msgpack' || c === msgpack.name) return msgpack;
  if (c === 'json' || c === json.name) return json;
  if (typeof c === 'object' && c && typeof c.encode === 'function' && typeof c.decode === 'function') return c;
  throw new TypeError(`unknown codec ${String(c)}: want "msgpack" or "json"`);
}
