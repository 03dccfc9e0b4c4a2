package schema

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
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

// FuzzNumberRules checks parseDouble and parseInt against exact arithmetic
// (math/big): a number is taken exactly when, and only when, the column
// holds it as written: a double whose shortest decimal is the number, an
// int64 equal to it.
func FuzzNumberRules(f *testing.F) {
	for _, s := range []string{"0", "-0", "0.1", "1e-400", "9007199254740993", "9007199254740993.0", "4.0000000000000001",
		"123.4500", "5e-324", "2.5e-324", "1.7976931348623157e308", "1e309", "-9223372036854775808", "9.223372036854775807e18",
		"25e-1", "2500e-2", "0.30000000000000004", "100000000000000000000000000000000000001", "1E+2", "0e-99999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !isNumberText(s) || len(s) > 400 {
			return
		}
		exact, ok := new(big.Rat).SetString(s)
		if !ok {
			return // an exponent beyond big.Rat's reach
		}
		d, dok := parseDouble([]byte(s))
		want := false
		if g, err := strconv.ParseFloat(s, 64); err == nil {
			shortest, _ := new(big.Rat).SetString(strconv.FormatFloat(g, 'e', -1, 64))
			want = shortest.Cmp(exact) == 0
		}
		if dok != want {
			t.Errorf("parseDouble(%s) = %v, %v; want ok %v", s, d, dok, want)
		}
		n, iok := parseInt([]byte(s))
		wantInt := exact.IsInt() && exact.Num().IsInt64()
		if iok != wantInt || iok && exact.Num().Int64() != n {
			t.Errorf("parseInt(%s) = %d, %v; want ok %v (%s)", s, n, iok, wantInt, exact.RatString())
		}
		if td, tok := parseDouble(s); td != d && !(math.IsNaN(td) && math.IsNaN(d)) || tok != dok {
			t.Errorf("parseDouble of the text %s = %v, %v; of the bytes %v, %v", s, td, tok, d, dok)
		}
	})
}
