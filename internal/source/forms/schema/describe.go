package schema

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// Describe is the shape of a value as it may be logged: its JSON type and
// its length, never the value itself, which may be personal (a name, an
// email, a phone number): `string(12 chars)`, `number(5 chars)`,
// `boolean`, `null`, `object(48 bytes)`, `array(31 bytes)`, or
// `text(9 bytes)` for text that is not JSON.
func Describe(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "empty"
	}
	switch c := v[0]; {
	case c == '"':
		n := utf8.RuneCount(v) - 2
		if n < 0 {
			n = 0
		}
		return fmt.Sprintf("string(%d chars)", n)
	case c == '{':
		return fmt.Sprintf("object(%d bytes)", len(v))
	case c == '[':
		return fmt.Sprintf("array(%d bytes)", len(v))
	case c == '-' || c >= '0' && c <= '9':
		return fmt.Sprintf("number(%d chars)", len(v))
	case bytes.Equal(v, []byte("true")) || bytes.Equal(v, []byte("false")):
		return "boolean"
	case bytes.Equal(v, []byte("null")):
		return "null"
	default:
		return fmt.Sprintf("text(%d bytes)", len(v))
	}
}
