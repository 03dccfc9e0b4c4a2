package forms

import (
	"unicode/utf8"

	"github.com/syncd-dev/syncd/internal/jsontext"
)

// validUTF8JSON reports whether b is one JSON value (white space around it
// allowed) and valid UTF-8: exactly utf8.Valid(b) && json.Valid(b), in one
// pass. It is the gate of the fast page decoder, which runs on every page a
// sync reads: encoding/json's validator calls a state function per byte and
// was about a seventh of a backfill's CPU. FuzzValidUTF8JSON holds it to the
// reference.
func validUTF8JSON(b []byte) bool {
	valid, _ := scanJSON(b, true)
	return valid
}

// ValidJSON is json.Valid(b) (invalid UTF-8 inside strings allowed, as
// there), and compact reports whether a valid b is also already compact:
// json.Compact would return it unchanged (no white space outside strings).
// The schema's value mapper checks every composite answer with it.
func ValidJSON(b []byte) (valid, compact bool) { return scanJSON(b, false) }

// scanJSON checks b in one pass without recursion; checkUTF8 also requires
// the strings to be valid UTF-8 (nothing outside strings can be other than
// ASCII in valid JSON).
func scanJSON(b []byte, checkUTF8 bool) (valid, compact bool) {
	i := skipWS(b, 0)
	end, spaced := valueEnd(b, i, checkUTF8)
	if end < 0 {
		return false, false
	}
	j := skipWS(b, end)
	return j == len(b), j == len(b) && i == 0 && end == len(b) && !spaced
}

// valueEnd returns the index just past the one JSON value that starts at
// b[i] (no white space before it), or -1 when there is none; spaced
// reports white space inside it, outside its strings. checkUTF8 also
// requires its strings to be valid UTF-8.
func valueEnd(b []byte, i int, checkUTF8 bool) (end int, spaced bool) {
	// encoding/json refuses nesting deeper than this (its maxNestingDepth).
	const maxDepth = 10000
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '[' per open container
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return -1, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return -1, false
			}
			stack = append(stack, c)
			if i++; i < len(b) && isWS(b[i]) {
				i, spaced = skipWS(b, i), true
			}
			if i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				if i = objectKey(b, i, checkUTF8, &spaced); i < 0 {
					return -1, false
				}
			}
			continue
		case c == '"':
			if i = stringEnd(b, i, checkUTF8); i < 0 {
				return -1, false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = numberEnd(b, i); i < 0 {
				return -1, false
			}
		case c == 't':
			if !hasLiteral(b, i, "true") {
				return -1, false
			}
			i += 4
		case c == 'f':
			if !hasLiteral(b, i, "false") {
				return -1, false
			}
			i += 5
		case c == 'n':
			if !hasLiteral(b, i, "null") {
				return -1, false
			}
			i += 4
		default:
			return -1, false
		}
		// After a value: close containers, or go on to the next element.
		for {
			if len(stack) == 0 {
				return i, spaced
			}
			if i < len(b) && isWS(b[i]) {
				i, spaced = skipWS(b, i), true
			}
			if i >= len(b) {
				return -1, false
			}
			top := stack[len(stack)-1]
			if b[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if b[i] != ',' {
				return -1, false
			}
			if i++; i < len(b) && isWS(b[i]) {
				i, spaced = skipWS(b, i), true
			}
			if top == '{' {
				if i = objectKey(b, i, checkUTF8, &spaced); i < 0 {
					return -1, false
				}
			}
			break
		}
	}
}

// objectKey checks the key and colon at b[i:] and returns the index of the
// member's value (after white space), or -1.
func objectKey(b []byte, i int, checkUTF8 bool, spaced *bool) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = stringEnd(b, i, checkUTF8); i < 0 {
		return -1
	}
	if i < len(b) && isWS(b[i]) {
		i, *spaced = skipWS(b, i), true
	}
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	if i++; i < len(b) && isWS(b[i]) {
		i, *spaced = skipWS(b, i), true
	}
	return i
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func hasLiteral(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// stringEnd returns the index just past the valid string literal (valid
// escapes, no control characters, valid UTF-8 if checkUTF8) starting at
// b[i], or -1.
func stringEnd(b []byte, i int, checkUTF8 bool) int {
	i++
	for {
		if i = jsontext.PlainEnd(b, i); i >= len(b) {
			return -1
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		case c < 0x20:
			return -1
		case !checkUTF8:
			i++
		default: // a multi-byte sequence
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// numberEnd returns the index just past the number in JSON's grammar
// starting at b[i], or -1.
func numberEnd(b []byte, i int) int {
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return -1
		}
	}
	return i
}
