// Package ids keeps record ids compactly. The Forms API's ids are lowercase
// UUIDs: 36 bytes of text, 16 of value. The version index stores them as 16
// bytes, and a window's set of ids seen keeps them in a map without pointers,
// which the collector does not scan. Any other id is kept as it came, so
// that unpacking always gives back exactly the id the source sent.
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
	// several times for every row a batch writes.
	pairs := [16]uint8{0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34}
	var bad byte
	for i, at := range pairs {
		hi, lo := nibbles[id[at]], nibbles[id[at+1]]
		bad |= hi | lo
		u[i] = hi<<4 | lo&0xf
	}
	return u, bad < 0x10
}

// nibbles is the value of each lowercase hex digit, at the digit's byte,
// and 0x10 at every other byte. A table, not two comparisons: a random
// id's digits and letters defeat the branch predictor, which made packing
// six times slower in a sync than on one id over and over.
const nibbles = "" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x0a\x0b\x0c\x0d\x0e\x0f\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10" +
	"\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10\x10"

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

// Set is a set of ids. The zero value is not usable: use NewSet.
//
// Against a map of cloned strings, 50,000 UUIDs take 1.2 MB instead of
// 4.1 MB and no allocation each, in a map the collector does not scan; an
// insert alone costs more (154 ns against 97: Go's maps of 16-byte keys
// take the generic path). End to end the set was the faster of the two,
// and memory decides: two windows of a wide backfill hold one each.
type Set struct {
	uuids map[[16]byte]struct{}
	other map[string]struct{}
}

// NewSet is an empty set with room for about hint UUIDs.
func NewSet(hint int) *Set {
	return &Set{uuids: make(map[[16]byte]struct{}, hint)}
}

// Add puts id in the set and reports whether it was not there yet. The set
// keeps a copy of id, never id's bytes: ids are often sliced from a page's
// buffer, which the set would otherwise keep alive.
func (s *Set) Add(id string) bool {
	if u, ok := PackUUID(id); ok {
		n := len(s.uuids)
		s.uuids[u] = struct{}{}
		return len(s.uuids) > n
	}
	if _, dup := s.other[id]; dup {
		return false
	}
	if s.other == nil {
		s.other = make(map[string]struct{})
	}
	s.other[string([]byte(id))] = struct{}{}
	return true
}

// Has reports whether id is in the set.
func (s *Set) Has(id string) bool {
	if u, ok := PackUUID(id); ok {
		_, in := s.uuids[u]
		return in
	}
	_, in := s.other[id]
	return in
}

// Len is the number of ids in the set.
func (s *Set) Len() int { return len(s.uuids) + len(s.other) }
