package schema

import (
	"bytes"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/syncd-dev/syncd/internal/jsontext"
	"github.com/syncd-dev/syncd/internal/rfc3339"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// The helpers below walk JSON that json.Valid has accepted, so they only
// find boundaries and never need to report syntax errors. Working on the raw
// bytes avoids decoding into map[string]any, matches keys exactly (the
// standard decoder folds case) and tells null from "" and from absent.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// trimJSON trims the white space JSON allows around a value.
func trimJSON(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && !isSpace(b[i]) && b[i] != ',' && b[i] != ']' && b[i] != '}' && b[i] != ':' {
		i++
	}
	return i
}

// stringEnd returns the index just past the string literal starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; ; i++ {
		if i = jsontext.PlainEnd(b, i); i >= len(b) {
			return len(b)
		}
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// eachElement calls fn with the index of every element of the array a
// (a[0] == '['); fn decodes the element there and returns the index just
// past it, so that an element is scanned once. It stops at the first call
// that returns false, and reports whether every call returned true.
func eachElement(a []byte, fn func(i int) (end int, ok bool)) bool {
	for i := skipSpace(a, 1); i < len(a) && a[i] != ']'; {
		end, ok := fn(i)
		if !ok {
			return false
		}
		if i = skipSpace(a, end); i < len(a) && a[i] == ',' {
			i = skipSpace(a, i+1)
		}
	}
	return true
}

// plainLiteral returns the body of the string literal at b[i] when it
// needs no unescaping or checking (printable ASCII), and the index just
// past it: such a literal is found and taken in one scan. ok is false for
// anything else.
func plainLiteral(b []byte, i int) (body []byte, end int, ok bool) {
	if b[i] != '"' {
		return nil, 0, false
	}
	j := jsontext.PlainEnd(b, i+1)
	if j >= len(b) || b[j] != '"' {
		return nil, 0, false
	}
	return b[i+1 : j], j + 1, true
}

// unquote returns the text of a string literal as valid UTF-8, appending
// decoded text to dst when the literal has escapes. It returns the text and
// the extended dst; without escapes the text is a sub-slice of s.
func unquote(dst, s []byte) (text, grown []byte) {
	body := s[1 : len(s)-1]
	if jsontext.PlainEnd(body, 0) == len(body) {
		return body, dst // printable ASCII: nothing to decode or check
	}
	if bytes.IndexByte(body, '\\') < 0 {
		if utf8.Valid(body) {
			return body, dst
		}
		return bytes.ToValidUTF8(body, []byte("\uFFFD")), dst
	}
	start := len(dst)
	dst = jsontext.AppendUnescaped(dst, body)
	text = dst[start:]
	if !utf8.Valid(text) {
		text = bytes.ToValidUTF8(text, []byte("\uFFFD"))
	}
	return text, dst
}

// validJSON reports whether v (trimmed) is one JSON value. Scalars, the
// common case, are checked here without the general scanner.
func validJSON(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	switch c := v[0]; {
	case c == '"':
		return validString(v)
	case c == '-' || c >= '0' && c <= '9':
		return isNumberText(v)
	case c == 't':
		return string(v) == "true"
	case c == 'f':
		return string(v) == "false"
	case c == 'n':
		return string(v) == "null"
	}
	valid, _ := forms.ValidJSON(v)
	return valid
}

// validString reports whether v is exactly one JSON string literal.
func validString(v []byte) bool {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return false
	}
	for i := 1; i < len(v)-1; i++ {
		if i = jsontext.PlainEnd(v[:len(v)-1], i); i >= len(v)-1 {
			break
		}
		switch c := v[i]; {
		case c < 0x20, c == '"':
			return false
		case c == '\\':
			i++
			if i >= len(v)-1 {
				return false // the closing quote was escaped
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if jsontext.Hex4(v[:len(v)-1], i+1) < 0 {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return true
}

// isEmpty reports whether a (trimmed, valid) value is an empty answer:
// null, "", [] or {}.
func isEmpty(v []byte) bool {
	switch {
	case len(v) == 0:
		return true
	case v[0] == 'n':
		return true // null: the only literal starting with n
	case v[0] == '"':
		return len(v) == 2
	case v[0] == '[', v[0] == '{':
		return skipSpace(v, 1) == len(v)-1
	}
	return false
}

func isNumber[T string | []byte](v T) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// parseDouble reads a JSON number token (or a calculation's number text)
// that a double holds as written: its shortest decimal is the number
// itself. Numbers out of range, beyond a double's precision
// (9007199254740993, 0.10000000000000000001) or that underflow (1e-400)
// do not fit, so that no value is stored as another.
func parseDouble[T string | []byte](v T) (float64, bool) {
	if !isNumber(v) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, false
	}
	var buf [maxDigits]byte
	d, ok := decimalOf(v, &buf)
	if !ok {
		return 0, false
	}
	// Up to 15 significant digits, a normal double holds any decimal
	// (DBL_DIG): the exact check below is for the rare longer number.
	if len(d.digits) <= 15 && (len(d.digits) == 0 || math.Abs(f) >= 0x1p-1022) {
		return f, true
	}
	var text [32]byte
	var buf2 [maxDigits]byte
	held, ok := decimalOf(strconv.AppendFloat(text[:0], f, 'e', -1, 64), &buf2)
	return f, ok && held.exp == d.exp && bytes.Equal(held.digits, d.digits)
}

// parseInt reads a JSON number token that is a whole number in int64 range,
// such as 4, 4.0 or 4e3 (not 4.5, nor 4.0000000000000001).
func parseInt(v []byte) (int64, bool) {
	if !isNumber(v) {
		return 0, false
	}
	if bytes.IndexAny(v, ".eE") < 0 { // an integer token
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	}
	var buf [maxDigits]byte
	d, ok := decimalOf(v, &buf)
	switch {
	case !ok || len(d.digits) > d.exp || d.exp > 19:
		return 0, false // not whole, or too large
	case len(d.digits) == 0:
		return 0, true
	}
	var text [21]byte
	t := text[:0]
	if d.neg {
		t = append(t, '-')
	}
	t = append(t, d.digits...)
	for range d.exp - len(d.digits) {
		t = append(t, '0')
	}
	n, err := strconv.ParseInt(string(t), 10, 64)
	return n, err == nil
}

// maxDigits bounds the significant digits decimalOf keeps: a double's
// shortest decimal has at most 17, an int64 at most 19.
const maxDigits = 20

// decimal is a number as 0.digits × 10^exp, negated if neg: digits has
// no leading or trailing zeros, and zero has none.
type decimal struct {
	neg    bool
	digits []byte
	exp    int
}

// decimalOf reads a number in JSON's grammar (as strconv writes it too:
// "1.5e+07") into buf. It reports false for one with more than maxDigits
// significant digits.
func decimalOf[T string | []byte](v T, buf *[maxDigits]byte) (decimal, bool) {
	d := decimal{digits: buf[:0]}
	i := 0
	if i < len(v) && v[i] == '-' {
		d.neg = true
		i++
	}
	point := false
	zeros := 0 // zeros after the last nonzero digit, kept once another follows
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '.':
			point = true
			continue
		case c < '0' || c > '9':
		case c == '0' && len(d.digits) == 0: // a leading zero
			if point {
				d.exp--
			}
			continue
		case c == '0':
			zeros++
			if !point {
				d.exp++
			}
			continue
		default:
			if len(d.digits)+zeros >= maxDigits {
				return d, false
			}
			for ; zeros > 0; zeros-- {
				d.digits = append(d.digits, '0')
			}
			d.digits = append(d.digits, c)
			if !point {
				d.exp++
			}
			continue
		}
		break
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		sign := 1
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			if v[i] == '-' {
				sign = -1
			}
			i++
		}
		e := 0
		for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
			if e < 1<<24 { // far beyond any double's exponent
				e = e*10 + int(v[i]-'0')
			}
		}
		d.exp += sign * e
	}
	if len(d.digits) == 0 {
		d.exp = 0
	}
	return d, true
}

// isNumberText reports whether s is a number in JSON's grammar, the strict
// test for a calculation's string value ("12.50"); strconv alone would also
// take "Inf", "0x1p3" and "1_000".
func isNumberText[T string | []byte](s T) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// The range of dates and timestamps every reader takes: BigQuery's DATE
// and TIMESTAMP (years 1 to 9999, UTC). A value outside it would fail a
// whole load job, so it does not fit its column and is kept as text.
const (
	minDays   = -719162                // 0001-01-01
	maxDays   = 2932896                // 9999-12-31
	minMicros = -62135596800 * 1000000 // 0001-01-01T00:00:00Z
	maxMicros = 253402300800*1000000 - 1
)

// parseDate reads "YYYY-MM-DD" as days since the Unix epoch.
func parseDate(s []byte) (int32, bool) {
	days, ok := rfc3339.ParseDate(s)
	if !ok || days < minDays || days > maxDays {
		return 0, false
	}
	return int32(days), true
}

// parseTimestamp reads an RFC 3339 timestamp with a zone as microseconds
// since the epoch, UTC. A time without a zone is ambiguous and does not fit.
func parseTimestamp(s []byte) (int64, bool) {
	t, ok := rfc3339.Parse(s)
	if !ok {
		var err error
		if t, err = time.Parse(time.RFC3339Nano, string(s)); err != nil {
			return 0, false
		}
	}
	us := t.UnixMicro()
	if us < minMicros || us > maxMicros {
		return 0, false
	}
	return us, true
}
