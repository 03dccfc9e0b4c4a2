package schema

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// fuzzForm has one question of every documented type, a number and a text
// calculation, a URL parameter, a scheduling and a payment field.
func fuzzForm() *forms.Form {
	f := &forms.Form{ID: "fuzz"}
	for typ := range questionTypes {
		f.Questions = append(f.Questions, forms.Field{ID: typ, Name: typ, Type: typ})
	}
	slices.SortFunc(f.Questions, func(a, b forms.Field) int { return strings.Compare(a.ID, b.ID) })
	f.Calculations = []forms.Field{{ID: "cn", Name: "n", Type: "number"}, {ID: "ct", Name: "t", Type: "text"}}
	f.URLParameters = []forms.Field{{ID: "p", Name: "p"}}
	f.Scheduling = []forms.Field{{ID: "s", Name: "s"}}
	f.Payments = []forms.Field{{ID: "pay", Name: "pay"}}
	return f
}

// FuzzAppend feeds one arbitrary value to every column type, then the same
// value under an arbitrary answer type, and checks that nothing panics, the
// record is well formed, and no value is lost: each non-empty value is in
// its typed column or, as compact JSON, in the column's __v_json companion.
func FuzzAppend(f *testing.F) {
	fx := loadFixture(f)
	for _, s := range fx.Submissions {
		for _, a := range s.Questions {
			f.Add([]byte(a.Value), a.Type)
		}
		for _, p := range s.Payments {
			f.Add([]byte(p.Value), "")
		}
		for _, p := range s.Scheduling {
			f.Add([]byte(p.Value), "Address")
		}
	}
	for _, seed := range []string{
		``, `{"a":`, `"\ud800"`, "\"\xff\xfe\"", `1e400`, `-0`, `[null]`, `[{}]`, `{"url":"u","url":"v"}`,
		`[[[[[[[[[[]]]]]]]]]]`, `"12.50"`, `12.50`, `{"start":"2024-13-01"}`, `"0000-01-01"`, `"9999-12-31T23:59:59.999999999Z"`,
		`{"latitude":1e308,"longitude":-1e308}`, `{"userId":9.3e18}`, "\"a\\u0000b\"", `{"zipCode":"\u00e9"}`,
	} {
		f.Add([]byte(seed), "ShortAnswer")
	}
	tab, _, err := New(fuzzForm(), Options{IncludeEditLink: true})
	if err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, value []byte, answerType string) {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		b := NewBuilder(tab, mem)
		defer b.Release()

		s1 := &forms.Submission{SubmissionID: "s1", SubmissionTime: testTime, EditLink: string(value)}
		s2 := &forms.Submission{SubmissionID: "s2", SubmissionTime: testTime}
		for _, q := range tab.Sources {
			if q.Kind == KindQuestion {
				s1.Questions = append(s1.Questions, forms.Answer{ID: q.ID, Type: q.Type, Value: value})
				s2.Questions = append(s2.Questions, forms.Answer{ID: q.ID, Name: string(value), Type: answerType, Value: value})
			}
		}
		s1.Calculations = []forms.Calculation{{ID: "cn", Type: "number", Value: string(value)}, {ID: "ct", Type: "text", Value: string(value)}}
		s1.URLParameters = []forms.URLParameter{{ID: "p", Value: string(value)}}
		s1.Scheduling = []forms.SchedulingEntry{{ID: "s", Value: value}}
		s1.Payments = []forms.PaymentEntry{{ID: "pay", Value: value}}
		s2.Questions = append(s2.Questions, forms.Answer{ID: "new", Name: string(value), Type: answerType, Value: value})
		s2.Calculations = []forms.Calculation{{ID: "cn", Type: answerType, Value: string(value)}}
		for _, s := range []*forms.Submission{s1, s2} {
			if err := b.Append(s, testLin); err != nil {
				t.Fatalf("append %s: %v", s.SubmissionID, err)
			}
		}
		rec, out, _ := b.Finish()
		defer rec.Release()

		if rec.NumRows() != 2 || !rec.Schema().Equal(out.ArrowSchema()) {
			t.Fatalf("record: %d rows, schema matches table: %v", rec.NumRows(), rec.Schema().Equal(out.ArrowSchema()))
		}
		roundTripIPC(t, rec, mem)
		if _, err := Marshal(out); err != nil {
			t.Fatalf("marshal evolved table: %v", err)
		}

		// The hand-written scanner agrees with encoding/json.
		trimmed := trimJSON(value)
		valid := json.Valid(trimmed)
		if validJSON(trimmed) != valid {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", trimmed, !valid, valid)
		}
		var str string
		if valid && trimmed[0] == '"' && json.Unmarshal(trimmed, &str) == nil && utf8.Valid(trimmed) {
			if got, _ := unquote(nil, trimmed); string(got) != str {
				t.Fatalf("unquote(%q) = %q, encoding/json says %q", trimmed, got, str)
			}
		}

		// Row 0: every value is kept, typed or as JSON text.
		var kept string
		if valid {
			var buf bytes.Buffer
			_ = json.Compact(&buf, trimmed)
			kept = strings.ToValidUTF8(buf.String(), "\uFFFD")
		} else {
			kept = strings.ToValidUTF8(string(trimmed), "\uFFFD")
		}
		empty := len(trimmed) == 0 || valid && isEmpty(trimmed)
		byName := func(name string) any {
			if !rec.Schema().HasField(name) {
				return nil
			}
			return values(t, rec, name)[0]
		}
		for _, c := range tab.Columns {
			if c.Kind != KindQuestion && c.Kind != KindScheduling && c.Kind != KindPayment {
				continue
			}
			typed, companion := byName(c.Name), any(nil)
			for _, j := range out.Columns {
				if j.Kind == KindVariantJSON && j.Parent == c.Name {
					companion = byName(j.Name)
				}
			}
			switch {
			case empty:
				if typed != nil || companion != nil {
					t.Errorf("%s: empty value %q stored as %v / %v", c.Name, value, typed, companion)
				}
			case (typed == nil) == (companion == nil):
				t.Errorf("%s: value %q stored as typed %v and companion %v; want exactly one", c.Name, value, typed, companion)
			case companion != nil && companion != kept:
				t.Errorf("%s: companion %q, want %q", c.Name, companion, kept)
			case c.Type == TypeJSON && valid && typed != kept:
				t.Errorf("%s: JSON text %q, want %q", c.Name, typed, kept)
			}
		}
		text := strings.ToValidUTF8(string(value), "\uFFFD")
		if got := byName("calc_t"); len(value) > 0 && got != text {
			t.Errorf("text calculation %q, want %q", got, text)
		}
		if n, j := byName("calc_n"), byName("calc_n__v_json"); len(value) > 0 && (n == nil) == (j == nil) {
			t.Errorf("number calculation %q stored as %v / %v; want exactly one", value, n, j)
		}
		if got := byName("edit_link"); len(value) > 0 && got != text {
			t.Errorf("edit_link %q, want %q", got, text)
		}

		// A value the decoder checked (valid, compact UTF-8 JSON) is not
		// checked again, and lands exactly where an unchecked one does.
		if ok, compact := forms.ValidJSON(value); ok && compact && utf8.Valid(value) {
			checked := *s1
			checked.ValuesChecked = true
			got, _, _ := build(t, tab, &checked)
			want, _, _ := build(t, tab, s1)
			if !array.RecordEqual(got, want) {
				t.Errorf("value %q checked by the decoder is stored otherwise than unchecked", value)
			}
		}
	})
}

// roundTripIPC writes rec in the Arrow IPC format and reads it back, which
// fails on a malformed record (child lengths, offsets, validity).
func roundTripIPC(t *testing.T, rec arrow.Record, mem memory.Allocator) {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		t.Fatalf("write IPC: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close IPC writer: %v", err)
	}
	r, err := ipc.NewReader(&buf, ipc.WithAllocator(mem))
	if err != nil {
		t.Fatalf("read IPC: %v", err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("read IPC: no record: %v", r.Err())
	}
	if !array.RecordEqual(rec, r.Record()) {
		t.Fatal("record changed across an IPC round trip")
	}
}
