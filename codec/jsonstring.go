package codec

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// plainEnvelope and plainText are the bytes each way writes as they are: every byte but
// quotation marks, backslashes and control characters, and for envelopes only ASCII (the
// others are read as UTF-8 first).
var plainEnvelope, plainText = plainBytes(utf8.RuneSelf), plainBytes(256)

func plainBytes(end int) (plain [256]bool) {
	for b := 0x20; b < end; b++ {
		plain[b] = b != '"' && b != '\\'
	}
	return plain
}

// appendJSONString appends s as a JSON string of the codec's own envelopes (method names,
// subscription ids, error messages): escaped as encoding/json escapes it but for \b and \f,
// written \u0008 and \u000c as the wire has always had them. Invalid UTF-8 becomes U+FFFD.
func appendJSONString(dst []byte, s string) []byte { return appendQuoted(dst, s, false) }

// AppendJSONText appends s, UTF-8 text, as a JSON string for a document that encoding/json
// marshals to embed (a RawJSON): once embedded, the bytes encoding/json gives for s. It
// escapes what JSON must, with \b and \f short as encoding/json writes them since Go 1.22,
// and leaves <, >, & and U+2028/U+2029 to the encoder, which escapes them as it embeds.
func AppendJSONText(dst, s []byte) []byte { return appendQuoted(dst, s, true) }

// appendQuoted is both ways of writing a JSON string: AppendJSONText's when text is set,
// else appendJSONString's, which also escapes U+2028/U+2029 as encoding/json does. The
// two differ in their plain bytes, \b and \f, and whether non-ASCII is read as UTF-8.
func appendQuoted[S string | []byte](dst []byte, s S, text bool) []byte {
	plain := &plainEnvelope
	if text {
		plain = &plainText
	}
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if plain[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			case b == '\b' && text:
				dst = append(dst, '\\', 'b')
			case b == '\f' && text:
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			start = i + size
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			start = i + size
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
