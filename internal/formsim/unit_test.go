package formsim

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"unicode/utf8"
)

func TestMixIsABijection(t *testing.T) {
	a, b := uint64(mulA), uint64(mulB)
	if a*invMulA != 1 || b*invMulB != 1 {
		t.Fatal("inverse multipliers are wrong")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, x := range append([]uint64{0, 1, ^uint64(0), 1 << 63}, func() []uint64 {
		var xs []uint64
		for range 1000 {
			xs = append(xs, r.Uint64())
		}
		return xs
	}()...) {
		if got := unmix64(mix64(x)); got != x {
			t.Fatalf("unmix64(mix64(%#x)) = %#x", x, got)
		}
	}
}

var uuidLike = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestIDCodec(t *testing.T) {
	c := newIDCodec(42)
	seen := map[string]bool{}
	for _, form := range []int{0, 1, 7, 9999} {
		for _, ord := range []uint32{0, 1, 2, 1000, 999_999, 1<<32 - 1} {
			id := c.id(form, ord)
			if !uuidLike.MatchString(id) {
				t.Fatalf("id %q does not look like the service's", id)
			}
			if seen[id] {
				t.Fatalf("id %q issued twice", id)
			}
			seen[id] = true
			f, o, ok := c.decode(id)
			if !ok || f != form || o != ord {
				t.Fatalf("decode(%q) = %d, %d, %v; want %d, %d", id, f, o, ok, form, ord)
			}
		}
	}
	good := c.id(3, 12345)
	tampered := []byte(good)
	tampered[5] ^= 1 // still hex, different value
	if tampered[5] > 'f' || (tampered[5] > '9' && tampered[5] < 'a') {
		tampered[5] = '0'
	}
	for _, id := range []string{"", "abc", string(tampered), good[:35] + "g", good[:8] + "x" + good[9:],
		"00000000-0000-0000-0000-000000000000", newIDCodec(43).id(3, 12345)} {
		if _, _, ok := c.decode(id); ok {
			t.Errorf("decode(%q) accepted an id the codec never issued", id)
		}
	}
}

// TestIndexAgainstModel drives the blocked index and a plain sorted slice
// with the same random operations and compares every query.
func TestIndexAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var x index
	var model []rec
	ord := uint32(0)
	newRec := func() rec {
		ord++
		return rec{t: int64(r.IntN(5000)), ord: ord, cls: class(r.IntN(int(numClasses)))}
	}
	// Sorted bulk load, as New does, then random edits.
	for range 3000 {
		model = append(model, newRec())
	}
	slices.SortFunc(model, cmpRec)
	for _, m := range model {
		x.appendSorted(m)
	}
	masks := []classMask{1, 2, 4, 3, 7}
	check := func(step int) {
		t.Helper()
		for _, m := range masks {
			lo, hi := int64(r.IntN(5200)-100), int64(r.IntN(5200)-100)
			var want []rec
			for _, e := range model {
				if e.cls.in(m) && e.t >= lo && e.t < hi {
					want = append(want, e)
				}
			}
			if got := x.countRange(m, lo, hi); got != len(want) {
				t.Fatalf("step %d: countRange(%b, %d, %d) = %d, want %d", step, m, lo, hi, got, len(want))
			}
			skip, limit := r.IntN(len(want)+3), 1+r.IntN(200)
			got := x.page(nil, m, lo, hi, skip, limit)
			wantPage := want[min(skip, len(want)):min(skip+limit, len(want))]
			if !slices.Equal(got, wantPage) {
				t.Fatalf("step %d: page(%b, %d, %d, skip %d, limit %d) = %d recs, want %d", step, m, lo, hi, skip, limit, len(got), len(wantPage))
			}
		}
		n := 0
		for _, b := range x.blocks {
			if len(b.recs) == 0 || len(b.recs) > blockMax {
				t.Fatalf("step %d: block of %d recs", step, len(b.recs))
			}
			n += len(b.recs)
		}
		if n != len(model) || x.count(7) != len(model) {
			t.Fatalf("step %d: index holds %d (counts %d), model %d", step, n, x.count(7), len(model))
		}
	}
	check(-1)
	for step := range 6000 {
		switch r.IntN(3) {
		case 0, 1:
			e := newRec()
			if r.IntN(4) == 0 {
				e.t = model[r.IntN(len(model))].t // a tie
			}
			x.insert(e)
			i, _ := slices.BinarySearchFunc(model, e, cmpRec)
			model = slices.Insert(model, i, e)
		case 2:
			i := r.IntN(len(model))
			if _, ok := x.remove(model[i]); !ok {
				t.Fatalf("step %d: remove of a held rec failed", step)
			}
			if _, ok := x.find(model[i]); ok {
				t.Fatalf("step %d: removed rec still found", step)
			}
			model = slices.Delete(model, i, i+1)
		}
		if step%500 == 0 {
			check(step)
		}
	}
	check(6000)
	for k := range len(model) {
		if k%97 != 0 {
			continue
		}
		got, ok := x.nth(7, k)
		if !ok || got != model[k] {
			t.Fatalf("nth(%d) = %+v, want %+v", k, got, model[k])
		}
	}
	if _, ok := x.remove(rec{t: -1, ord: 1}); ok {
		t.Fatal("removed a rec that was never inserted")
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	cases := []string{"", "plain", `quote " and \ backslash`, "new\nline\ttab\rcr", "\x00\x01\x1f\x7f",
		"Zoë Łoś 日本 👍", "bad utf8 \xff\xfe end", "line sep \u2028 para \u2029", "<html>&amp;"}
	for _, s := range cases {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("appendString(%q) = %s: not JSON: %v", s, enc, err)
		}
		want := s
		if !utf8.ValidString(s) {
			want = string([]rune(s)) // invalid bytes become U+FFFD, as encoding/json does
		}
		if got != want {
			t.Errorf("appendString(%q) decodes to %q", s, got)
		}
	}
}

func TestTimelineIsSortedWithTies(t *testing.T) {
	tl := timeline{key: 99, startMs: 1_700_000_000_000, spanMs: 30 * dayMs, n: 20000, cycles: 30}
	prev := tl.at(0)
	ties, run, groupsOf3 := 0, 1, 0
	for x := uint32(1); x < tl.n; x++ {
		t0 := tl.at(x)
		if t0 < prev || t0 < tl.startMs || t0 >= tl.startMs+tl.spanMs {
			t.Fatalf("at(%d) = %d after %d: not sorted or out of range", x, t0, prev)
		}
		if t0 == prev {
			ties++
			run++
			if run == 3 {
				groupsOf3++
			}
		} else {
			run = 1
		}
		prev = t0
	}
	share := float64(ties) / float64(tl.n)
	if share < 0.02 || share > 0.08 || groupsOf3 < 10 {
		t.Errorf("%d ties (%.1f%%), %d groups of 3+: want a few percent and some groups", ties, 100*share, groupsOf3)
	}
}

// TestShapedQuestions: FormShape.Questions gives a form that many questions
// (at most the 24 everyday ones), and moves no other form's questions.
func TestShapedQuestions(t *testing.T) {
	questions := func(shapes []FormShape) [][]string {
		s, err := New(Config{APIKey: "k", Seed: 3, Forms: 3, Submissions: 10, Shapes: shapes})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var out [][]string
		for _, id := range s.FormIDs() {
			f, _ := s.Form(id)
			var qs []string
			for _, q := range f.Questions {
				qs = append(qs, q.ID+" "+q.Name+" "+q.Type)
			}
			out = append(out, qs)
		}
		return out
	}
	plain := questions(nil)
	tests := []struct {
		asked, want int
	}{{20, 20}, {6, 6}, {24, 24}, {40, 24}}
	for _, tt := range tests {
		got := questions([]FormShape{{}, {Questions: tt.asked}})
		if len(got[1]) != tt.want {
			t.Errorf("Questions %d: form 1 asks %d questions, want %d", tt.asked, len(got[1]), tt.want)
		}
		if !slices.Equal(got[0], plain[0]) || !slices.Equal(got[2], plain[2]) {
			t.Errorf("Questions %d on form 1 changed another form's questions", tt.asked)
		}
		if n := min(len(got[1]), len(plain[1])); !slices.Equal(got[1][:6], plain[1][:6]) || n < 6 {
			t.Errorf("Questions %d: form 1 lost its base questions", tt.asked)
		}
	}
}
