// Package wsframe is the WebSocket frame codec (RFC 6455 §5): frame headers read and written,
// payloads masked, close frames' payloads encoded and decoded. It knows bytes only: no
// connection, no goroutine, no state beyond the frame at hand, so that it is tested and fuzzed
// over byte slices, and gateway/internal/wsnet frames a connection's messages with it.
//
// Entry points: ParseHeader (a header held in a byte slice) and ReadHeader and ReadFrame (from
// an io.Reader) read; AppendHeader (the server's final, unmasked header, on the hot path),
// Header.Append and AppendFrame (any frame, masked or not) write; Mask masks and unmasks;
// ClosePayload and ParseClose are the close frame's payload.
//
// Caveats: no extension is known (a frame's reserved bits are reported, not interpreted), and
// the rules of a conversation (the order of fragments, which side masks, the subprotocol's
// frame kind) are the connection's to enforce: a Header is what the bytes say.
package wsframe
