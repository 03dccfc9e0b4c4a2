package formsim

import "strings"

// Hashing and identifiers. Every generated value derives from a 64-bit key by
// the splitmix64 finalizer: it is a bijection, so it can also be inverted, which
// lets a submission id carry its own row number without any lookup table.

const (
	mulA    = 0xbf58476d1ce4e5b9
	mulB    = 0x94d049bb133111eb
	invMulA = 0x96de1b173f119089 // mulA * invMulA == 1 (mod 2^64)
	invMulB = 0x319642b2d24d8ec3 // mulB * invMulB == 1 (mod 2^64)
	golden  = 0x9e3779b97f4a7c15
)

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= mulA
	x ^= x >> 27
	x *= mulB
	x ^= x >> 31
	return x
}

// unmix64 inverts mix64.
func unmix64(x uint64) uint64 {
	x = unxorshift(x, 31)
	x *= invMulB
	x = unxorshift(x, 27)
	x *= invMulA
	x = unxorshift(x, 30)
	return x
}

// unxorshift inverts y = x ^ x>>s.
func unxorshift(y uint64, s uint) uint64 {
	x := y
	for i := uint(0); i <= 64/s; i++ {
		x = y ^ x>>s
	}
	return x
}

// rng is a tiny splitmix64 stream used to generate values: cheap to seed per
// row and per question, so a value depends only on (seed, form, row, question)
// and never on what was generated before it.
type rng struct{ s uint64 }

func newRng(seed uint64) rng { return rng{s: seed} }

func (r *rng) next() uint64 {
	r.s += golden
	return mix64(r.s)
}

// intn returns a value in [0, n); n must be > 0. The modulo bias is
// irrelevant for test data.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// float returns a value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// chance reports true with probability p.
func (r *rng) chance(p float64) bool { return r.float() < p }

func (r *rng) pick(xs []string) string { return xs[r.intn(len(xs))] }

// idCodec turns (form index, row ordinal) into a submission id that looks
// like the service's (a lowercase UUID-like string) and back. The first half
// is a keyed bijection of the pair, the second a keyed check of the first, so
// a made-up or mistyped id is rejected rather than mapped to some row.
type idCodec struct{ k1, k2 uint64 }

func newIDCodec(seed int64) idCodec {
	return idCodec{k1: mix64(uint64(seed) ^ 0x1d5eed), k2: mix64(uint64(seed) ^ 0xc4ec6)}
}

const idLen = 36

func (c idCodec) words(form int, ord uint32) (uint64, uint64) {
	w1 := mix64(uint64(form)<<32 | uint64(ord) ^ c.k1)
	return w1, mix64(w1 ^ c.k2)
}

// appendID appends the id in 8-4-4-4-12 form.
func (c idCodec) appendID(b []byte, form int, ord uint32) []byte {
	const hex = "0123456789abcdef"
	w1, w2 := c.words(form, ord)
	for i := 0; i < 32; i++ {
		switch i {
		case 8, 12, 16, 20:
			b = append(b, '-')
		}
		w := w1
		shift := uint(60 - 4*i)
		if i >= 16 {
			w, shift = w2, uint(60-4*(i-16))
		}
		b = append(b, hex[(w>>shift)&0xf])
	}
	return b
}

func (c idCodec) id(form int, ord uint32) string {
	return string(c.appendID(make([]byte, 0, idLen), form, ord))
}

// decode returns the form index and ordinal an id names; ok is false for
// anything this codec did not produce.
func (c idCodec) decode(id string) (form int, ord uint32, ok bool) {
	if len(id) != idLen || strings.Count(id, "-") != 4 {
		return 0, 0, false
	}
	var w [2]uint64
	n := 0
	for i := 0; i < len(id); i++ {
		ch := id[i]
		switch i {
		case 8, 13, 18, 23:
			if ch != '-' {
				return 0, 0, false
			}
			continue
		}
		var d uint64
		switch {
		case ch >= '0' && ch <= '9':
			d = uint64(ch - '0')
		case ch >= 'a' && ch <= 'f':
			d = uint64(ch-'a') + 10
		default:
			return 0, 0, false
		}
		w[n/16] = w[n/16]<<4 | d
		n++
	}
	if mix64(w[0]^c.k2) != w[1] {
		return 0, 0, false
	}
	v := unmix64(w[0]) ^ c.k1
	if v>>32 > 1<<31 {
		return 0, 0, false
	}
	return int(v >> 32), uint32(v), true
}
