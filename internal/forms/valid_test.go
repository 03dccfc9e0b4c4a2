package forms

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// reference is what validUTF8JSON must equal.
func reference(b []byte) bool { return utf8.Valid(b) && json.Valid(b) }

// validSeeds are the JSON texts where a hand-written validator tends to
// part from encoding/json: every token, every way to end one too early.
func validSeeds() []string {
	seeds := []string{
		``, ` `, `null`, `nul`, `nulll`, `true`, `tru`, `false`, `fals`, `0`, `-0`, `-`, `01`, `1.`, `1.5`, `.5`,
		`1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`, `1x`, `"x"`, `"`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`,
		`"\u00e9"`, `"\u00g9"`, `"\u00e"`, `"\ud800"`, `"\x"`, "\"a\tb\"", "\"a\x00\"", "\"\x7f\"",
		`"é"`, "\"\xff\"", "\"\xed\xa0\x80\"", "\"\xef\xbf\xbd\"", "\xef\xbb\xbf{}",
		`{}`, `{ }`, `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`, `[1,2]`, `{"a":1}`, `{"a":1,}`, `{"a"}`, `{"a":}`,
		`{"a" : [ 1 , { } ] }`, `{1:2}`, `{"a":1 "b":2}`, `[}`, `{]`, `[[[]]]`, `[[[]]`, `[]]`, `{}{}`, `{} `, "\t\n\r {}\n",
		`{"responses":[],"totalResponses":0}`, "{\"a\":\"\xc3\"}",
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	}
	return append(seeds, pageSeeds()...)
}

func TestValidUTF8JSON(t *testing.T) {
	for _, s := range validSeeds() {
		if got, want := validUTF8JSON([]byte(s)), reference([]byte(s)); got != want {
			t.Errorf("validUTF8JSON(%.60q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidUTF8JSON(f *testing.F) {
	for _, s := range validSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validUTF8JSON(b), reference(b); got != want {
			t.Errorf("validUTF8JSON(%q) = %v, want %v", b, got, want)
		}
	})
}

func BenchmarkValidUTF8JSON(b *testing.B) {
	body := []byte(`{"responses":[` + strings.Repeat(`{"submissionId":"abc","questions":[{"id":"q","name":"Prénom","value":"Zoë \"x\" 👍"},{"id":"n","value":12.5e3}]},`, 300) + `{}],"totalResponses":301}`)
	for _, bc := range []struct {
		name string
		fn   func([]byte) bool
	}{{"fused", validUTF8JSON}, {"utf8+encoding-json", reference}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if !bc.fn(body) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
