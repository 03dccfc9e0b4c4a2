// Package ids keeps record ids compactly. The Forms API's ids are lowercase
// UUIDs: 36 bytes of text, 16 of value, and the version index stores them as
// 16 bytes. Any other id is kept as it came, so that unpacking always gives
// back exactly the id the source sent.
package ids

const hexDigits = "0123456789abcdef"

// PackUUID turns a lowercase 8-4-4-4-12 hex id into its 16 bytes; ok is
// false for any other id (uppercase included: it would not unpack to the
// id the source sent).
func PackUUID(id string) (u [16]byte, ok bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return u, false
	}
	// One pass over fixed offsets, without a branch per character: it runs
	// twice for every row a batch writes (its intent, then its chunk).
	pairs := [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}
	var bad byte
	for i, at := range pairs {
		hi, lo := hexNibble(id[at]), hexNibble(id[at+1])
		bad |= hi | lo
		u[i] = hi<<4 | lo&0xf
	}
	return u, bad < 0x10
}

// hexNibble is the value of a lowercase hex digit, or 0x10 for any other
// byte.
func hexNibble(c byte) byte {
	if d := c - '0'; d < 10 {
		return d
	}
	if d := c - 'a'; d < 6 {
		return d + 10
	}
	return 0x10
}

// UnpackUUID is the lowercase 8-4-4-4-12 text of u.
func UnpackUUID(u [16]byte) string {
	var out [36]byte
	j := 0
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		out[j], out[j+1] = hexDigits[c>>4], hexDigits[c&0xf]
		j += 2
	}
	return string(out[:])
}
