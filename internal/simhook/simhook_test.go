package simhook

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// receiver records what a loopback subscriber got, by body.
type receiver struct {
	url string
	mu  sync.Mutex
	got map[string]int // body → attempts received
	hdr []http.Header
}

func newReceiver(t *testing.T, status int) *receiver {
	t.Helper()
	rc := &receiver{got: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got[string(b)]++
		rc.hdr = append(rc.hdr, r.Header.Clone())
		rc.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/hook/s3cr3t-token"
	return rc
}

// within checks that n of total happened at rate, within 4.5 standard
// deviations of the binomial: the draws are seeded, so this is a check of
// the sampling, not a flaky statistical test.
func within(t *testing.T, what string, n, total int64, rate float64) {
	t.Helper()
	want := rate * float64(total)
	sd := math.Sqrt(float64(total) * rate * (1 - rate))
	if math.Abs(float64(n)-want) > 4.5*sd+0.5 {
		t.Errorf("%s: %d of %d, want about %.0f (rate %v)", what, n, total, want, rate)
	}
}

func drain(t *testing.T, d *Deliverer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFaultRates(t *testing.T) {
	const total = 1500
	for _, tc := range []struct {
		name   string
		faults Faults
	}{
		{"none", Faults{}},
		{"drop 20%", Faults{DropRate: 0.2}},
		{"duplicate 30%", Faults{DuplicateRate: 0.3}},
		{"bare 40%", Faults{BareRate: 0.4}},
		{"bad signature 10%", Faults{BadSignatureRate: 0.1}},
		{"all at once", Faults{DropRate: 0.2, DuplicateRate: 0.25, BareRate: 0.5, BadSignatureRate: 0.15, DelayMax: 2 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newReceiver(t, http.StatusNoContent)
			d, err := New(7, 0, tc.faults)
			if err != nil {
				t.Fatal(err)
			}
			var forgedAsked int64
			var mu sync.Mutex
			for i := range total {
				id := strconv.Itoa(i)
				d.Send(Message{URL: rc.url, Body: []byte(`{"env":` + id + `}`), Bare: []byte(`{"bare":` + id + `}`),
					Header: func(body []byte, forged bool) http.Header {
						h := http.Header{"Content-Type": {"application/json"}, "X-Sig": {"good"}}
						if forged {
							mu.Lock()
							forgedAsked++
							mu.Unlock()
							h.Set("X-Sig", "forged")
						}
						return h
					}})
			}
			drain(t, d)
			d.Close()
			st := d.Stats()
			f := tc.faults
			within(t, "dropped", st.Dropped, total, f.DropRate)
			sent := total - st.Dropped
			within(t, "duplicated", st.Duplicated, sent, f.DuplicateRate)
			within(t, "bare", st.Bare, sent, f.BareRate)
			within(t, "bad signature", st.BadSignature, sent, f.BadSignatureRate)
			if forgedAsked != st.BadSignature {
				t.Errorf("forged headers asked %d times, counted %d", forgedAsked, st.BadSignature)
			}
			// What the receiver saw agrees with the counters.
			var attempts, distinct, bare, extra int64
			for body, n := range rc.got {
				attempts += int64(n)
				distinct++
				extra += int64(n - 1)
				if strings.HasPrefix(body, `{"bare":`) {
					bare++
				}
				if n > 3 {
					t.Errorf("%s delivered %d times", body, n)
				}
			}
			forged := 0
			for _, h := range rc.hdr {
				if h.Get("X-Sig") == "forged" {
					forged++
				}
			}
			if st.Deliveries != total || distinct != sent || attempts != sent+st.Copies || extra != st.Copies ||
				st.Attempted != attempts || st.Delivered != attempts || st.Failed != 0 || bare != st.Bare {
				t.Errorf("stats %+v; receiver: %d attempts, %d distinct, %d bare, %d extra copies", st, attempts, distinct, bare, extra)
			}
			if st.Duplicated > 0 && (st.Copies < st.Duplicated || st.Copies > 2*st.Duplicated) {
				t.Errorf("%d duplicated deliveries made %d extra copies, want 1 or 2 each", st.Duplicated, st.Copies)
			}
			if f.BadSignatureRate > 0 && forged == 0 {
				t.Error("no forged header reached the receiver")
			}
		})
	}
}

// The same seed and the same events inject the same faults.
func TestSeededDecisions(t *testing.T) {
	f := Faults{DropRate: 0.2, DuplicateRate: 0.3, BareRate: 0.5, BadSignatureRate: 0.1, DelayMin: time.Millisecond, DelayMax: time.Second}
	plans := func(seed uint64) []plan {
		d, err := New(seed, 0, f)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var out []plan
		for i := range 200 {
			m := Message{Body: []byte("e" + strconv.Itoa(i)), Bare: []byte("b"), Header: func([]byte, bool) http.Header { return nil }}
			d.mu.Lock()
			out = append(out, d.decide(&m))
			d.mu.Unlock()
		}
		return out
	}
	same := func(a, b []plan) bool {
		return slices.EqualFunc(a, b, func(x, y plan) bool {
			return string(x.body) == string(y.body) && x.forged == y.forged && slices.Equal(x.delays, y.delays)
		})
	}
	a, b, c := plans(1), plans(1), plans(2)
	if !same(a, b) {
		t.Error("one seed gave two fault sequences")
	}
	if same(a, c) {
		t.Error("two seeds gave one fault sequence")
	}
	// Copies are delayed independently, within [min, max], and not in send
	// order: deliveries arrive reordered.
	var delays []time.Duration
	for _, p := range a {
		for _, d := range p.delays {
			if d < f.DelayMin || d > f.DelayMax {
				t.Fatalf("delay %s outside [%s, %s]", d, f.DelayMin, f.DelayMax)
			}
			delays = append(delays, d)
		}
	}
	if slices.IsSorted(delays) {
		t.Error("delays are in send order: nothing would be reordered")
	}
}

// Close ends pending delays at once and counts them as failed; nothing is
// sent after it.
func TestCloseEndsDelays(t *testing.T) {
	rc := newReceiver(t, http.StatusOK)
	d, err := New(1, 0, Faults{DelayMin: time.Hour, DelayMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d.Send(Message{URL: rc.url, Body: []byte("{}")})
	}
	d.Close()
	d.Send(Message{URL: rc.url, Body: []byte("{}")})
	st := d.Stats()
	if st.Deliveries != 5 || st.Failed != 5 || st.Attempted != 0 || st.Delayed != 5 || len(rc.got) != 0 {
		t.Errorf("after Close: %+v, receiver got %v", st, rc.got)
	}
}

// A receiver's refusal is a failed attempt, never a retry.
func TestRefusedAttempts(t *testing.T) {
	rc := newReceiver(t, http.StatusUnauthorized)
	d, _ := New(1, 0, Faults{})
	for range 3 {
		d.Send(Message{URL: rc.url, Body: []byte("{}")})
	}
	drain(t, d)
	d.Close()
	if st := d.Stats(); st.Attempted != 3 || st.Failed != 3 || st.Delivered != 0 || rc.got["{}"] != 3 {
		t.Errorf("stats %+v, receiver %v", st, rc.got)
	}
}

func TestFaultsValidateAndJSON(t *testing.T) {
	for _, tc := range []struct {
		f    Faults
		want string // "" valid
	}{
		{Faults{}, ""},
		{Faults{DropRate: 1, DuplicateRate: 1, BareRate: 1, BadSignatureRate: 1, DelayMin: time.Second, DelayMax: time.Second}, ""},
		{Faults{DropRate: 1.5}, "drop rate 1.5 is not a share"},
		{Faults{DuplicateRate: -0.1}, "duplicate rate"},
		{Faults{BareRate: math.NaN()}, "bare rate"},
		{Faults{BadSignatureRate: 2}, "bad signature rate"},
		{Faults{DelayMin: -time.Second}, "must not be negative"},
		{Faults{DelayMin: time.Second}, ""}, // fixed delay
		{Faults{DelayMin: time.Second, DelayMax: time.Millisecond}, "max 1ms is less than min 1s"},
	} {
		err := tc.f.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", tc.f, err, tc.want)
		}
		if _, nerr := New(1, 0, tc.f); (nerr == nil) != (tc.want == "") {
			t.Errorf("New(%+v) = %v", tc.f, nerr)
		}
	}
	in := Faults{DropRate: 0.2, DuplicateRate: 0.1, DelayMin: 10 * time.Millisecond, DelayMax: 250 * time.Millisecond, BareRate: 0.3, BadSignatureRate: 0.05}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Faults
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip %s = %+v, %v", b, out, err)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"drop_rat":0.2}`, "unknown field"},
		{`{"delay_max":"soon"}`, `delay_max "soon" is not a duration`},
		{`[1]`, "webhook faults"},
	} {
		if err := json.Unmarshal([]byte(tc.body), &out); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Unmarshal(%s) = %v, want %q", tc.body, err, tc.want)
		}
	}
}

// Changing one knob changes only its own decisions: every delivery makes
// the same draws whatever its fate, so a drop, an extra copy or a delay
// span does not shift the decisions of the deliveries after it.
func TestOneKnobKeepsTheOtherDecisions(t *testing.T) {
	base := Faults{DuplicateRate: 0.5, BareRate: 0.5, BadSignatureRate: 0.5, DelayMin: time.Millisecond, DelayMax: 10 * time.Millisecond}
	tests := []struct {
		name   string
		change func(*Faults)
		// same compares what the changed knob must leave alone, for a
		// delivery sent under both.
		same func(a, b plan) bool
	}{
		{"drop rate", func(f *Faults) { f.DropRate = 0.3 }, func(a, b plan) bool {
			return string(a.body) == string(b.body) && a.forged == b.forged && slices.Equal(a.delays, b.delays)
		}},
		{"delay span", func(f *Faults) { f.DelayMax = f.DelayMin }, func(a, b plan) bool {
			return string(a.body) == string(b.body) && a.forged == b.forged && len(a.delays) == len(b.delays)
		}},
		{"duplicate rate", func(f *Faults) { f.DuplicateRate = 0 }, func(a, b plan) bool {
			return string(a.body) == string(b.body) && a.forged == b.forged && a.delays[0] == b.delays[0]
		}},
		{"bare rate", func(f *Faults) { f.BareRate = 0 }, func(a, b plan) bool {
			return a.forged == b.forged && slices.Equal(a.delays, b.delays)
		}},
	}
	plans := func(f Faults) []plan {
		d, err := New(7, 0, f)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var out []plan
		for range 200 {
			m := Message{Body: []byte("e"), Bare: []byte("b"), Header: func([]byte, bool) http.Header { return nil }}
			d.mu.Lock()
			out = append(out, d.decide(&m))
			d.mu.Unlock()
		}
		return out
	}
	want := plans(base)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base
			tt.change(&f)
			got := plans(f)
			sent, differ := 0, 0
			for i := range want {
				if len(want[i].delays) == 0 || len(got[i].delays) == 0 {
					continue // dropped
				}
				sent++
				if !tt.same(want[i], got[i]) {
					differ++
				}
			}
			if sent < 100 {
				t.Fatalf("only %d of 200 deliveries sent under both knobs: nothing to compare", sent)
			}
			if differ > 0 {
				t.Errorf("%d of %d deliveries changed decisions the %s does not govern", differ, sent, tt.name)
			}
		})
	}
}
