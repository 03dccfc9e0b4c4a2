// Package jsontext reads the text of JSON string literals: what both the
// forms' page scanner and the mapper's value scanner need, once.
package jsontext

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendUnescaped decodes the escapes of a valid string literal's body the
// way encoding/json does: a lone surrogate becomes U+FFFD.
func AppendUnescaped(dst, body []byte) []byte {
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			dst = append(dst, c)
			continue
		}
		i++
		switch body[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := Hex4(body, i+1)
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+2 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
					r2 = Hex4(body, i+3)
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					i += 6
					r = dec
				} else {
					r = utf8.RuneError
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // " \ /
			dst = append(dst, body[i])
		}
	}
	return dst
}

// Hex4 reads the four hex digits at b[i:], or returns -1.
func Hex4(b []byte, i int) rune {
	if i+4 > len(b) {
		return -1
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// LiteralAt reports whether b continues at i with the string literal of
// text ("text"), which must need no escapes: plain bytes or valid UTF-8
// without quotes, backslashes or control characters. It lets a scanner
// that expects a known key, or the string it read last at this place,
// match it without scanning it.
func LiteralAt(b []byte, i int, text string) bool {
	end := i + len(text) + 2
	return end <= len(b) && b[i] == '"' && b[end-1] == '"' && string(b[i+1:end-1]) == text
}

// The bytes a string literal holds as they are ("plain"): printable ASCII
// other than the quote and the backslash. PlainEnd skips runs of them eight
// at a time: strings are most of a page's bytes, and a byte-at-a-time loop
// was the largest single cost of decoding one.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// PlainEnd returns the index of the first byte of b at or after i that is
// not plain (a quote, a backslash, a control character or a byte of a
// multi-byte UTF-8 sequence), or len(b).
func PlainEnd(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// A byte's high bit in special is set when the byte is below 0x20
		// (the subtraction wraps), is '"' or '\\' (the xor leaves 0, and
		// 0-1 wraps), or is 0x80 or above (x's own high bit). A wrap borrows
		// from the byte above it only, so the lowest flagged byte is always
		// a true match: the one PlainEnd looks for.
		special := ((x - ones*0x20) | (x ^ ones*'"' - ones) | (x ^ ones*'\\' - ones) | x) & highs
		if special != 0 {
			return i + bits.TrailingZeros64(special)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}
