package schema

import (
	"encoding/json"
	"testing"
)

// TestJSONHelpersMatchEncodingJSON checks the hand-written validator and
// unescaper against encoding/json on literals chosen for their edges.
func TestJSONHelpersMatchEncodingJSON(t *testing.T) {
	literals := []string{
		`""`, `"a"`, `"a\"b"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\u00e9"`, `"\u00E9"`, `"\u0000"`,
		`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"é"`,
		`"\"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"a"b"`, "\"a\tb\"", `"abc`, `"`, `"\\\"`,
		`0`, `-0`, `01`, `1.`, `.5`, `1e5`, `1E+5`, `-1.5e-3`, `+1`, `1e`, `--1`, `0x10`, `Inf`, `NaN`,
		`true`, `false`, `null`, `tru`, `nul`, `nullx`, `[1,]`, `{"a":1}`, `{"a"}`, `[`, `]`,
	}
	for _, lit := range literals {
		v := []byte(lit)
		if got, want := validJSON(v), json.Valid(v); got != want {
			t.Errorf("validJSON(%s) = %v, encoding/json says %v", lit, got, want)
			continue
		}
		var want string
		if v[0] != '"' || json.Unmarshal(v, &want) != nil {
			continue
		}
		if got, _ := unquote(nil, v); string(got) != want {
			t.Errorf("unquote(%s) = %q, encoding/json says %q", lit, got, want)
		}
	}
}

func TestKnownQuestionType(t *testing.T) {
	for typ, want := range map[string]bool{
		"ShortAnswer": true, "Password": true, "LocationCoordinates": true, "URLInput": true,
		"shortanswer": false, "FancyNewWidget": false, "": false, "number": false,
	} {
		if got := KnownQuestionType(typ); got != want {
			t.Errorf("KnownQuestionType(%q) = %v, want %v", typ, got, want)
		}
	}
}
