package formsim

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/simhook"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// hookSink is a loopback webhook receiver that decodes every delivery
// with the client's own decoder.
type hookSink struct {
	url  string
	mu   sync.Mutex
	subs map[string]int  // submission id → deliveries received
	bare map[string]bool // submissions delivered in the bare shape
	bad  []string        // bodies the decoder refused
}

func newHookSink(t *testing.T) *hookSink {
	t.Helper()
	k := &hookSink{subs: map[string]int{}, bare: map[string]bool{}}
	k.url = httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		d, err := forms.DecodeWebhook(b)
		k.mu.Lock()
		defer k.mu.Unlock()
		if err != nil {
			k.bad = append(k.bad, string(b))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if d.FormID == "" { // every copy of a delivery has the same shape
			k.bare[d.Submission.SubmissionID] = true
		}
		k.subs[d.Submission.SubmissionID]++
	})) + "/hooks/forms/acct?token=s3cr3t"
	return k
}

func (k *hookSink) snapshot() (map[string]int, int, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	subs := make(map[string]int, len(k.subs))
	for id, n := range k.subs {
		subs[id] = n
	}
	return subs, len(k.bare), slices.Clone(k.bad)
}

func drainHooks(t *testing.T, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.DrainWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
}

// nearRate checks n of total against rate within 4.5 binomial standard
// deviations (the draws are seeded: this checks the sampling, it does not
// flake).
func nearRate(t *testing.T, what string, n, total int64, rate float64) {
	t.Helper()
	sd := math.Sqrt(float64(total) * rate * (1 - rate))
	if math.Abs(float64(n)-rate*float64(total)) > 4.5*sd+0.5 {
		t.Errorf("%s: %d of %d, want about %.0f", what, n, total, rate*float64(total))
	}
}

func TestWebhookDeliveryFaults(t *testing.T) {
	const n = 600
	for _, tc := range []struct {
		name   string
		faults simhook.Faults
	}{
		{"envelope only", simhook.Faults{}},
		{"bare 30%", simhook.Faults{BareRate: 0.3}},
		{"drop 20%", simhook.Faults{DropRate: 0.2}},
		{"duplicate 25%", simhook.Faults{DuplicateRate: 0.25}},
		{"drop, duplicate, bare, delayed", simhook.Faults{DropRate: 0.2, DuplicateRate: 0.3, BareRate: 0.5, DelayMax: 3 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := newHookSink(t)
			cfg := testConfig(5, 1, 10)
			cfg.WebhookFaults = tc.faults
			s := start(t, cfg)
			form := s.FormIDs()[0]
			if status, body, _ := s.do(t, "POST", "/webhook/create", map[string]string{"formId": form, "url": sink.url}); status != 200 {
				t.Fatalf("create webhook: %d %s", status, body)
			}
			times := make([]time.Time, n)
			for i := range times {
				times[i] = testNow.Add(-time.Duration(i) * time.Second)
			}
			created, err := s.Insert(form, times...)
			if err != nil {
				t.Fatal(err)
			}
			drainHooks(t, s.Server)
			subs, bare, bad := sink.snapshot()
			st := s.Stats().Webhooks
			if len(bad) > 0 {
				t.Fatalf("the client's decoder refused %d deliveries, first %.200s", len(bad), bad[0])
			}
			var copies int64
			for id, k := range subs {
				if !slices.Contains(created, id) {
					t.Fatalf("delivered %s, which was not created", id)
				}
				copies += int64(k - 1)
			}
			f := tc.faults
			nearRate(t, "dropped", st.Dropped, n, f.DropRate)
			nearRate(t, "duplicated", st.Duplicated, n-st.Dropped, f.DuplicateRate)
			nearRate(t, "bare", st.Bare, n-st.Dropped, f.BareRate)
			if int64(len(subs)) != n-st.Dropped || copies != st.Copies || int64(bare) != st.Bare ||
				st.Deliveries != n || st.Failed != 0 || st.Delivered != n-st.Dropped+st.Copies {
				t.Errorf("stats %+v; receiver: %d distinct, %d extra copies, %d bare", st, len(subs), copies, bare)
			}
			if f.DuplicateRate > 0 && st.Copies == 0 || f.BareRate > 0 && bare == 0 || f.DropRate > 0 && st.Dropped == 0 {
				t.Errorf("a fault never happened: %+v", st)
			}
		})
	}
}

// adminDo calls an admin endpoint of base (a server's root URL).
func adminDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestWebhookAdmin(t *testing.T) {
	keep, lose := newHookSink(t), newHookSink(t)
	s := start(t, testConfig(6, 2, 5))
	root := strings.TrimSuffix(s.base, BasePath)
	form := s.FormIDs()[0]
	var hookIDs []int64
	for _, u := range []string{keep.url, lose.url} {
		status, body, _ := s.do(t, "POST", "/webhook/create", map[string]string{"formId": form, "url": u})
		var out struct{ ID int64 }
		if status != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("create webhook: %d %s", status, body)
		}
		hookIDs = append(hookIDs, out.ID)
	}

	status, body := adminDo(t, "GET", root+"/_admin/webhooks", "")
	var listed []Webhook
	if status != 200 || json.Unmarshal(body, &listed) != nil {
		t.Fatalf("list: %d %s", status, body)
	}
	want := []Webhook{{hookIDs[0], form, keep.url}, {hookIDs[1], form, lose.url}}
	if !slices.Equal(listed, want) {
		t.Errorf("listed %+v, want %+v", listed, want)
	}

	// Forgotten behind the owner's back: the API no longer knows it.
	lost := strconv.FormatInt(hookIDs[1], 10)
	for _, tc := range []struct {
		path   string
		status int
	}{{lost, 204}, {lost, 404}, {"abc", 400}} {
		if status, body := adminDo(t, "DELETE", root+"/_admin/webhooks/"+tc.path, ""); status != tc.status {
			t.Errorf("forget %s: %d %s, want %d", tc.path, status, body, tc.status)
		}
	}
	if status, _, _ := s.do(t, "POST", "/webhook/delete", `{"webhookId":`+lost+`}`); status != 404 {
		t.Errorf("deleting a forgotten webhook: %d, want 404", status)
	}

	// One submission now: its id and time, delivered to the webhook left.
	status, body = adminDo(t, "POST", root+"/_admin/forms/"+form+"/submissions", "")
	var sub Submitted
	if status != 201 || json.Unmarshal(body, &sub) != nil || sub.FormID != form || !sub.SubmissionTime.Equal(testNow) {
		t.Fatalf("submit now: %d %s", status, body)
	}
	if got := s.ExpectedIDs(form); !slices.Contains(got, sub.SubmissionID) {
		t.Errorf("submitted %s is not listed", sub.SubmissionID)
	}
	if status, body := adminDo(t, "POST", root+"/_admin/forms/nope/submissions", ""); status != 404 || !strings.Contains(string(body), "nope") {
		t.Errorf("submit to an unknown form: %d %s", status, body)
	}
	// Edited as a person does (README, Development): 204, then 404 for an
	// id the form does not have.
	if status, body := adminDo(t, "POST", root+"/_admin/forms/"+form+"/submissions/"+sub.SubmissionID+"/edit", ""); status != 204 {
		t.Errorf("edit: %d %s, want 204", status, body)
	}
	if status, body := adminDo(t, "POST", root+"/_admin/forms/"+form+"/submissions/nope/edit", ""); status != 404 || !strings.Contains(string(body), "nope") {
		t.Errorf("edit an unknown submission: %d %s", status, body)
	}
	drainHooks(t, s.Server)
	if got, _, _ := keep.snapshot(); got[sub.SubmissionID] != 1 || len(got) != 1 {
		t.Errorf("kept webhook got %v, want %s once", got, sub.SubmissionID)
	}
	if got, _, _ := lose.snapshot(); len(got) != 0 {
		t.Errorf("forgotten webhook still got %v", got)
	}

	// Faults at run time: a bad knob is refused by name, a good one shows.
	for _, tc := range []struct {
		body, want string
		status     int
	}{
		{`{"drop_rate":2}`, "drop rate 2 is not a share", 400},
		{`{"dropp":0.1}`, "unknown field", 400},
		{`{"drop_rate":0.2,"duplicate_rate":0.1,"delay_min":"5ms","delay_max":"50ms","bare_rate":0.5}`, "", 204},
	} {
		status, body := adminDo(t, "PUT", root+"/_admin/webhook-faults", tc.body)
		if status != tc.status || !strings.Contains(string(body), tc.want) {
			t.Errorf("PUT faults %s: %d %s, want %d %q", tc.body, status, body, tc.status, tc.want)
		}
	}
	wantFaults := simhook.Faults{DropRate: 0.2, DuplicateRate: 0.1, DelayMin: 5 * time.Millisecond, DelayMax: 50 * time.Millisecond, BareRate: 0.5}
	if got := s.WebhookFaults(); got != wantFaults {
		t.Errorf("faults %+v, want %+v", got, wantFaults)
	}
	status, body = adminDo(t, "GET", root+"/_admin/stats", "")
	var st Stats
	if status != 200 || json.Unmarshal(body, &st) != nil || st.Webhooks.Deliveries != 1 || st.Webhooks.Delivered != 1 || st.WebhooksDelivered != 1 {
		t.Errorf("stats: %d %s", status, body)
	}
}

// Each workspace of a Multi registers and delivers on its own, and its
// admin endpoints live under its key.
func TestMultiWebhooks(t *testing.T) {
	keys := []string{"sk_a", "sk_b"}
	m, base := startMulti(t, 0, 0, keys...)
	root := strings.TrimSuffix(base, BasePath)
	sinks := []*hookSink{newHookSink(t), newHookSink(t)}
	for i, k := range keys {
		form := m.Workspace(k).FormIDs()[0]
		req, _ := http.NewRequest("POST", base+"/webhook/create", strings.NewReader(`{"formId":"`+form+`","url":"`+sinks[i].url+`"}`))
		req.Header.Set("Authorization", "Bearer "+k)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("create webhook for %s: %d", k, resp.StatusCode)
		}
	}
	for i, k := range keys {
		status, body := adminDo(t, "GET", root+"/_admin/accounts/"+k+"/webhooks", "")
		var listed []Webhook
		if status != 200 || json.Unmarshal(body, &listed) != nil || len(listed) != 1 || listed[0].URL != sinks[i].url {
			t.Errorf("%s webhooks: %d %s", k, status, body)
		}
	}
	form := m.Workspace("sk_b").FormIDs()[0]
	status, body := adminDo(t, "POST", root+"/_admin/accounts/sk_b/forms/"+form+"/submissions", "")
	var sub Submitted
	if status != 201 || json.Unmarshal(body, &sub) != nil {
		t.Fatalf("submit now: %d %s", status, body)
	}
	for _, k := range keys {
		drainHooks(t, m.Workspace(k))
	}
	if a, _, _ := sinks[0].snapshot(); len(a) != 0 {
		t.Errorf("workspace a got b's submission: %v", a)
	}
	if b, _, _ := sinks[1].snapshot(); b[sub.SubmissionID] != 1 {
		t.Errorf("workspace b got %v, want %s", b, sub.SubmissionID)
	}
	if status, _ := adminDo(t, "PUT", root+"/_admin/webhook-faults", `{"drop_rate":0.5}`); status != 204 {
		t.Errorf("PUT faults for all: %d", status)
	}
	for _, k := range keys {
		if f := m.Workspace(k).WebhookFaults(); f.DropRate != 0.5 {
			t.Errorf("%s drop rate %v", k, f.DropRate)
		}
	}
	for _, p := range []string{"/_admin/accounts/sk_nope/webhooks", "/_admin/webhooks"} {
		if status, _ := adminDo(t, "GET", root+p, ""); status != 404 {
			t.Errorf("GET %s: %d, want 404", p, status)
		}
	}
}

// Submissions the simulator makes itself while a client pages (arrivals,
// back-dated imports) and those created through the API are delivered
// too; in-progress ones are not submissions yet.
func TestWebhookLiveArrivals(t *testing.T) {
	sink := newHookSink(t)
	s := start(t, testConfig(8, 1, 30))
	form := s.FormIDs()[0]
	if status, _, _ := s.do(t, "POST", "/webhook/create", map[string]string{"formId": form, "url": sink.url}); status != 200 {
		t.Fatal(status)
	}
	before := s.ExpectedIDs(form)
	s.SetFaults(Faults{ArrivalsPerPage: 2, BackdatedPerPage: 1})
	s.walk(t, form, url.Values{}, 10) // four pages: 12 new submissions
	s.SetFaults(Faults{})
	if status, body, _ := s.do(t, "POST", "/forms/"+form+"/submissions", `{"submissions":[{}]}`); status != 200 {
		t.Fatalf("create: %d %s", status, body)
	}
	drainHooks(t, s.Server)
	var added []string
	for _, id := range s.ExpectedIDs(form) {
		if !slices.Contains(before, id) {
			added = append(added, id)
		}
	}
	got, _, _ := sink.snapshot()
	if len(added) < 13 || len(got) != len(added) {
		t.Fatalf("%d submissions added, %d delivered", len(added), len(got))
	}
	for _, id := range added {
		if got[id] != 1 {
			t.Errorf("%s delivered %d times", id, got[id])
		}
	}
}
