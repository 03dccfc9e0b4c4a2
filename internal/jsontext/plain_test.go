package jsontext

import "testing"

// plainEndByteAtATime is PlainEnd's reference.
func plainEndByteAtATime(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

func TestPlainEnd(t *testing.T) {
	tests := []struct {
		name string
		in   string
		from int
		want int
	}{
		{"empty", "", 0, 0},
		{"all plain, short", "abc", 0, 3},
		{"all plain, long", "abcdefghijklmnopqrstuvwxyz 0123456789", 0, 37},
		{"quote in the first word", `abc"defghijk`, 0, 3},
		{"quote in the second word", `abcdefghij"k`, 0, 10},
		{"backslash", `abcdefgh\ijk`, 0, 8},
		{"control character", "abcdefg\nhijk", 0, 7},
		{"delete is plain", "abcdefg\x7fhij\"", 0, 11},
		{"space is plain", "        \"", 0, 8},
		{"multi-byte sequence", "abcdéfghijk", 0, 4},
		{"first byte special", "\"abcdefghijk", 0, 0},
		{"from the middle", `"abcdefghijklmnop"`, 1, 17},
		{"a quote after a control byte in one word", "ab\x01cd\"efgh", 0, 2},
		{"0x20 after 0x1f", "abcdefg\x1f ", 0, 7},
		{"0xff", "abcdefgh\xffabc", 0, 8},
		{"from past the end", "abc", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlainEnd([]byte(tt.in), tt.from); got != tt.want {
				t.Errorf("PlainEnd(%q, %d) = %d, want %d", tt.in, tt.from, got, tt.want)
			}
		})
	}
}

// Every byte value at every position of a word, after every byte value: the
// eight-at-a-time path must agree with the byte loop, borrows included.
func TestPlainEndEveryByte(t *testing.T) {
	buf := make([]byte, 16)
	for prev := range 256 {
		for c := range 256 {
			for pos := range 8 {
				for i := range buf {
					buf[i] = 'a'
				}
				if pos > 0 {
					buf[pos-1] = byte(prev)
				}
				buf[pos] = byte(c)
				if got, want := PlainEnd(buf, 0), plainEndByteAtATime(buf, 0); got != want {
					t.Fatalf("PlainEnd(%q) = %d, want %d", buf, got, want)
				}
			}
		}
	}
}

func FuzzPlainEnd(f *testing.F) {
	f.Add([]byte(`{"id":"abc","value":"x\"y"}`), 2)
	f.Add([]byte("héllo wörld \x00\x1f\x7f\x80"), 0)
	f.Fuzz(func(t *testing.T, b []byte, from int) {
		if from < 0 || from > len(b) {
			return
		}
		if got, want := PlainEnd(b, from), plainEndByteAtATime(b, from); got != want {
			t.Fatalf("PlainEnd(%q, %d) = %d, want %d", b, from, got, want)
		}
	})
}

func BenchmarkPlainEnd(b *testing.B) {
	text := []byte(`Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore"`)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if PlainEnd(text, 0) != len(text)-1 {
			b.Fatal("wrong end")
		}
	}
}

func TestLiteralAt(t *testing.T) {
	tests := []struct {
		in   string
		at   int
		text string
		want bool
	}{
		{`{"id":1}`, 1, "id", true},
		{`{"idx":1}`, 1, "id", false}, // the literal goes on
		{`{"id`, 1, "id", false},      // cut before the closing quote
		{`{"id"`, 1, "id", true},      // the literal is whole
		{`{id":1}`, 1, "id", false},   // not a literal
		{`{"Id":1}`, 1, "id", false},  // exact, not folded
		{`{"":1}`, 1, "", true},       // the empty string
		{`{"é":1}`, 1, "é", true},     // multi-byte text
	}
	for _, tt := range tests {
		if got := LiteralAt([]byte(tt.in), tt.at, tt.text); got != tt.want {
			t.Errorf("LiteralAt(%q, %d, %q) = %v, want %v", tt.in, tt.at, tt.text, got, tt.want)
		}
	}
}
