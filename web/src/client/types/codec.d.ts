/**
 * codecFor returns the codec named "msgpack" or "json" (or by subprotocol),
 * or the codec itself.
 * @param {string|Codec|undefined} c
 * @returns {Codec}
 */
export function codecFor(c: string | Codec | undefined): Codec;
/** @type {Codec} */
export const msgpack: Codec;
/** @type {Codec} */
export const json: Codec;
export type Codec = {
    /**
     * the WebSocket subprotocol
     */
    name: string;
    /**
     * whether frames are binary (else text)
     */
    binary: boolean;
    encode: (msg: object) => (Uint8Array | string);
    /**
     * throws on a malformed frame
     */
    decode: (frame: ArrayBuffer | Uint8Array | string) => any;
};
