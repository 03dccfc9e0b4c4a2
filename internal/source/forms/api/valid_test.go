package forms

import (
	"bytes"
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
		`{"responses":[],"totalResponses":0}`, "{\"a\":\"\xc3\"}", `{"a": 1}`, `[1, 2]`, ` 1`, `1 `, `"a b"`, "[\n]", `{"a":[1,{"b":"c d"}]}`,
		strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
		strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	}
	return append(seeds, pageSeeds()...)
}

// checkValid compares both validators with encoding/json on b.
func checkValid(t *testing.T, b []byte) {
	t.Helper()
	if got, want := validUTF8JSON(b), reference(b); got != want {
		t.Errorf("validUTF8JSON(%.80q) = %v, want %v", b, got, want)
	}
	valid, compact := ValidJSON(b)
	if want := json.Valid(b); valid != want {
		t.Errorf("ValidJSON(%.80q) = %v, want %v", b, valid, want)
	}
	if valid {
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			t.Fatalf("json.Compact(%.80q): %v", b, err)
		}
		if want := bytes.Equal(buf.Bytes(), b); compact != want {
			t.Errorf("ValidJSON(%.80q) says compact %v, json.Compact says %v", b, compact, want)
		}
	} else if compact {
		t.Errorf("ValidJSON(%.80q): compact but not valid", b)
	}
}

func TestValidUTF8JSON(t *testing.T) {
	for _, s := range validSeeds() {
		checkValid(t, []byte(s))
	}
}

func FuzzValidUTF8JSON(f *testing.F) {
	for _, s := range validSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkValid(t, b) })
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
