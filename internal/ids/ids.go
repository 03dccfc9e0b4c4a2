// Package ids keeps record ids compactly. The Forms API's ids are lowercase
// UUIDs: 36 bytes of text, 16 of value. The version index stores them as 16
// bytes, and a window's set of ids seen keeps them in a table without pointers,
// which the collector does not scan. Any other id is kept as it came, so
// that unpacking always gives back exactly the id the source sent.
package ids

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

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
// UUIDs, nearly every id, are kept packed in an open-addressing table of
// 16-byte keys with a byte of each key's hash beside it. A window's set
// holds up to 50,000 ids and every row of a sync is added once, while the
// page scan streams through the cache: with Go's map (generic for 16-byte
// keys) each insert paid a cache miss on its group's control word, 5% of a
// narrow backfill's CPU. Here a new id reads only its tag byte (the tags of
// 50,000 ids are 65 KiB, which stay cached) and stores its key, and a store
// does not wait for its cache line. The collector does not scan either.
type Set struct {
	tags  []uint8 // 0: empty; else 0x80 | the hash's top 7 bits
	keys  [][16]byte
	n     int
	seed  [2]uint64
	other map[string]struct{}
}

// NewSet is an empty set with room for about hint UUIDs.
func NewSet(hint int) *Set {
	s := &Set{seed: [2]uint64{rand.Uint64(), rand.Uint64()}}
	s.alloc(slotsFor(hint))
	return s
}

// slotsFor is room for n ids at three quarters full: probing reads only
// tag bytes, which lie side by side, so a fuller table costs little time
// and a window's set takes about what Go's map took (1.1 MB for 50,000).
func slotsFor(n int) int {
	return max(16, n+n/3+1)
}

func (s *Set) alloc(slots int) {
	s.tags, s.keys = make([]uint8, slots), make([][16]byte, slots)
}

// hash mixes the key with the set's random seed (a service cannot choose
// ids that collide), as wyhash does: one 128-bit multiply.
func (s *Set) hash(u *[16]byte) uint64 {
	hi, lo := bits.Mul64(binary.LittleEndian.Uint64(u[:8])^s.seed[0], binary.LittleEndian.Uint64(u[8:])^s.seed[1])
	return hi ^ lo
}

// find is the slot holding u, or the empty slot where u belongs, and
// whether u is there.
func (s *Set) find(u *[16]byte) (slot int, tag uint8, found bool) {
	h := s.hash(u)
	tag = uint8(h>>57) | 0x80
	n := uint64(len(s.tags))
	i, _ := bits.Mul64(h, n) // h scaled to [0, n): any table size will do
	for {
		switch t := s.tags[i]; {
		case t == 0:
			return int(i), tag, false
		case t == tag && s.keys[i] == *u:
			return int(i), tag, true
		}
		if i++; i == n {
			i = 0
		}
	}
}

// grow doubles the table when it is three quarters full.
func (s *Set) grow() {
	tags, keys := s.tags, s.keys
	s.alloc(2 * len(tags))
	for i, t := range tags {
		if t != 0 {
			slot, tag, _ := s.find(&keys[i])
			s.tags[slot], s.keys[slot] = tag, keys[i]
		}
	}
}

// Add adds id and reports whether it was new. The set keeps no reference
// to id's bytes (they may be a page's buffer).
func (s *Set) Add(id string) bool {
	if u, ok := PackUUID(id); ok {
		slot, tag, found := s.find(&u)
		if found {
			return false
		}
		s.tags[slot], s.keys[slot] = tag, u
		if s.n++; 4*s.n > 3*len(s.tags) {
			s.grow()
		}
		return true
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

// Has reports whether id was added.
func (s *Set) Has(id string) bool {
	if u, ok := PackUUID(id); ok {
		_, _, found := s.find(&u)
		return found
	}
	_, in := s.other[id]
	return in
}

// Len is how many ids were added.
func (s *Set) Len() int { return s.n + len(s.other) }
