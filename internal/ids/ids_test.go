package ids

import (
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestPackUUID holds PackUUID to its definition: exactly the lowercase
// 8-4-4-4-12 hex ids pack, into the bytes hex.DecodeString gives, and
// unpack to the same id; anything else is kept as it is.
func TestPackUUID(t *testing.T) {
	lowerUUID := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	ids := []string{
		"0f8fad5b-d9cb-469f-a165-70867728950e",
		"00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"0F8FAD5B-D9CB-469F-A165-70867728950E", // uppercase: kept as sent
		"0f8fad5b-d9cb-469f-a165-70867728950",  // short
		"0f8fad5b-d9cb-469f-a165-70867728950e0",
		"0f8fad5bd-9cb-469f-a165-70867728950e", // dash moved
		"0f8fad5b-d9cb-469f-a165_70867728950e",
		"0f8fad5b-d9cb-469f-a165-70867728950g",
		"g0f8fad5-d9cb-469f-a165-70867728950e",
		"0f8fad5b-d9cb-469f-a165-7086772895/e", // '/' is '0'-1
		"0f8fad5b-d9cb-469f-a165-7086772895:e", // ':' is '9'+1
		"0f8fad5b-d9cb-469f-a165-7086772895`e", // '`' is 'a'-1
		"0f8fad5b-d9cb-469f-a165-7086772895\xffe",
		"",
		"submission-1",
	}
	for i := 0; i < 36; i++ { // every position of a valid id, broken
		b := []byte(ids[0])
		b[i] = 'x'
		ids = append(ids, string(b))
	}
	for c := 0; c < 256; c++ { // every byte, at a digit's place and at a dash's
		for _, at := range []int{0, 35, 8} {
			b := []byte(ids[0])
			b[at] = byte(c)
			ids = append(ids, string(b))
		}
	}
	for _, id := range ids {
		u, ok := PackUUID(id)
		if want := lowerUUID.MatchString(id); ok != want {
			t.Errorf("PackUUID(%q) ok = %v, want %v", id, ok, want)
			continue
		}
		if !ok {
			continue
		}
		want, err := hex.DecodeString(strings.ReplaceAll(id, "-", ""))
		if err != nil || !bytes.Equal(u[:], want) {
			t.Errorf("PackUUID(%q) = %x, want %x (%v)", id, u, want, err)
		}
		if back := UnpackUUID(u); back != id {
			t.Errorf("UnpackUUID(PackUUID(%q)) = %q", id, back)
		}
	}
}

// BenchmarkPackUUID packs many random ids in turn, as a backfill does: one
// id packed over and over lets the branch predictor learn its digits, and
// read a sixth of what a sync pays.
func BenchmarkPackUUID(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, 4096)
	for i := range ids {
		var u [16]byte
		for j := range u {
			u[j] = byte(rng.Uint32())
		}
		ids[i] = UnpackUUID(u)
	}
	i := 0
	for b.Loop() {
		if _, ok := PackUUID(ids[i%len(ids)]); !ok {
			b.Fatal("not packed")
		}
		i++
	}
}

// TestSet checks Add, Has and Len against a map of strings, for UUIDs and
// other ids alike, and that the set keeps no id's bytes.
func TestSet(t *testing.T) {
	tests := []struct {
		name string
		add  []string
	}{
		{"uuids", []string{"0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950f", "0f8fad5b-d9cb-469f-a165-70867728950e"}},
		{"others", []string{"s1", "s2", "s1", "", ""}},
		{"uppercase apart from lowercase", []string{"0F8FAD5B-D9CB-469F-A165-70867728950E", "0f8fad5b-d9cb-469f-a165-70867728950e", "0F8FAD5B-D9CB-469F-A165-70867728950E"}},
		{"mixed", []string{"a", "00000000-0000-0000-0000-000000000000", "a", "00000000-0000-0000-0000-000000000000", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, want := NewSet(1), map[string]bool{}
			for _, id := range tc.add {
				buf := []byte(id)
				if got, wantNew := s.Add(string(buf)), !want[id]; got != wantNew {
					t.Errorf("Add(%q) = %v, want %v", id, got, wantNew)
				}
				for i := range buf { // a page's buffer, reused
					buf[i] = 'x'
				}
				want[id] = true
				if s.Len() != len(want) {
					t.Errorf("Len() = %d after adding %q, want %d", s.Len(), id, len(want))
				}
			}
			for _, id := range append(tc.add, "never-added", "ffffffff-ffff-ffff-ffff-ffffffffffff") {
				if got := s.Has(id); got != want[id] {
					t.Errorf("Has(%q) = %v, want %v", id, got, want[id])
				}
			}
		})
	}
}

// TestSetAgainstMap adds random UUIDs, each one again with some
// probability and some differing from an earlier one in a single byte
// (the same tag is likely, the key is not), to sets sized well below and
// at their count: Add, Has and Len must agree with a map through every
// growth of the table.
func TestSetAgainstMap(t *testing.T) {
	for _, hint := range []int{0, 1, 100, 20_000} {
		rng := rand.New(rand.NewPCG(uint64(hint), 7))
		s, want := NewSet(hint), map[string]bool{}
		var added []string
		for i := 0; i < 20_000; i++ {
			var id string
			switch r := rng.IntN(10); {
			case r == 0 && len(added) > 0: // again
				id = added[rng.IntN(len(added))]
			case r == 1 && len(added) > 0: // one byte apart
				b := []byte(added[rng.IntN(len(added))])
				at := rng.IntN(36)
				if b[at] != '-' {
					b[at] = hexDigits[(strings.IndexByte(hexDigits, b[at])+1)%16]
				}
				id = string(b)
			default:
				var u [16]byte
				for j := range u {
					u[j] = byte(rng.Uint32())
				}
				id = UnpackUUID(u)
			}
			if got := s.Add(id); got == want[id] {
				t.Fatalf("hint %d: Add(%q) = %v with the id added before: %v", hint, id, got, want[id])
			}
			want[id] = true
			added = append(added, id)
			if s.Len() != len(want) {
				t.Fatalf("hint %d: Len() = %d, want %d", hint, s.Len(), len(want))
			}
		}
		for id := range want {
			if !s.Has(id) {
				t.Fatalf("hint %d: Has(%q) = false after adding it", hint, id)
			}
		}
		for i := 0; i < 1000; i++ {
			var u [16]byte
			for j := range u {
				u[j] = byte(rng.Uint32())
			}
			if id := UnpackUUID(u); s.Has(id) != want[id] {
				t.Fatalf("hint %d: Has(%q) = %v, want %v", hint, id, !want[id], want[id])
			}
		}
	}
}

// BenchmarkSetAdd adds a window's worth of random UUIDs (50,000, the
// largest window) to a set sized for them, as a window's walk does.
func BenchmarkSetAdd(b *testing.B) {
	const window = 50_000
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, window)
	for i := range ids {
		var u [16]byte
		for j := range u {
			u[j] = byte(rng.Uint32())
		}
		ids[i] = UnpackUUID(u)
	}
	for b.Loop() {
		s := NewSet(window)
		for _, id := range ids {
			s.Add(id)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*window), "ns/id")
}
