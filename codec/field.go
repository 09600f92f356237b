package codec

import "bytes"

// PrependField returns body, an object encoded by c, with the field key: value in front
// (value encoded by c): how a client adds params._meta to params it encoded already. A body
// that is not an object is ErrNotObject.
func PrependField(c Codec, body []byte, key string, value any) ([]byte, error) {
	v, err := c.Marshal(value)
	if err != nil {
		return nil, err
	}
	if c.Binary() {
		n, hdr, ok := mapHeader(body)
		if !ok {
			return nil, ErrNotObject
		}
		dst := appendMapHeader(make([]byte, 0, len(body)+len(key)+len(v)+8), n+1)
		dst = appendStr(dst, key)
		dst = append(dst, v...)
		return append(dst, body[hdr:]...), nil
	}
	body = bytes.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' || body[len(body)-1] != '}' {
		return nil, ErrNotObject
	}
	dst := append(make([]byte, 0, len(body)+len(key)+len(v)+4), '{')
	dst = appendJSONString(dst, key)
	dst = append(dst, ':')
	dst = append(dst, v...)
	if inner := bytes.TrimSpace(body[1 : len(body)-1]); len(inner) > 0 {
		dst = append(dst, ',')
		dst = append(dst, inner...)
	}
	return append(dst, '}'), nil
}
