package forms_test

// Tests of the client against the Forms API simulator (internal/formsim) over
// real loopback HTTP: every endpoint and query parameter, fault injection,
// and the rate-limit promise.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/syncd-dev/syncd/internal/formsim"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

const simKey = "sk_test_SIM_KEY"

var (
	simStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	simEnd   = time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
)

// startSim serves a simulator on loopback and returns it with its base URL.
func startSim(t *testing.T, cfg formsim.Config) (*formsim.Server, string) {
	t.Helper()
	if cfg.APIKey == "" {
		cfg.APIKey = simKey
	}
	if cfg.Start.IsZero() {
		cfg.Start, cfg.End = simStart, simEnd
	}
	sim, err := formsim.New(cfg)
	if err != nil {
		t.Fatalf("formsim.New: %v", err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return sim, srv.URL + formsim.BasePath
}

func simClient(t *testing.T, base string, mutate ...func(*forms.Config)) *forms.Client {
	t.Helper()
	cfg := forms.Config{
		BaseURL:     base,
		APIKey:      simKey,
		RateLimit:   1000,
		Burst:       100,
		MaxAttempts: 8,
		MinBackoff:  time.Millisecond,
		MaxBackoff:  5 * time.Millisecond,
		Timeout:     5 * time.Second,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := forms.New(cfg)
	if err != nil {
		t.Fatalf("forms.New: %v", err)
	}
	return c
}

// listAll pages through a form with sort=asc and returns the ids in order.
func listAll(t *testing.T, c *forms.Client, formID string, p forms.ListParams) []string {
	t.Helper()
	var ids []string
	p.Sort = forms.SortAsc
	if p.Limit == 0 {
		p.Limit = forms.MaxListLimit
	}
	for p.Offset = 0; ; {
		page, err := c.ListSubmissions(context.Background(), formID, p)
		if err != nil {
			t.Fatalf("list %s at offset %d: %v", formID, p.Offset, err)
		}
		for _, s := range page.Responses {
			ids = append(ids, s.SubmissionID)
		}
		p.Offset += len(page.Responses)
		if len(page.Responses) < p.Limit || p.Offset >= page.TotalResponses {
			return ids
		}
	}
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func TestSimReadEndpoints(t *testing.T) {
	sim, base := startSim(t, formsim.Config{Seed: 7, Forms: 2, Submissions: 320})
	c := simClient(t, base)
	ctx := context.Background()

	summaries, err := c.ListForms(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range summaries {
		listed = append(listed, s.FormID)
	}
	if !slices.Equal(sorted(listed), sorted(sim.FormIDs())) {
		t.Fatalf("ListForms = %v, simulator has %v", listed, sim.FormIDs())
	}

	for _, formID := range sim.FormIDs() {
		t.Run(formID, func(t *testing.T) {
			form, err := c.GetForm(ctx, formID)
			if err != nil {
				t.Fatal(err)
			}
			if form.ID != formID || len(form.Questions) == 0 {
				t.Errorf("form = %+v", form)
			}

			want := sim.ExpectedIDs(formID)
			got := listAll(t, c, formID, forms.ListParams{})
			if !slices.Equal(sorted(got), sorted(want)) {
				t.Fatalf("paged %d ids, simulator expects %d", len(got), len(want))
			}

			// limit=1 counts the whole form for the cost of one request.
			page, err := c.ListSubmissions(ctx, formID, forms.ListParams{Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if page.TotalResponses != len(want) || len(page.Responses) != 1 {
				t.Errorf("limit=1: total %d with %d rows, want %d with 1", page.TotalResponses, len(page.Responses), len(want))
			}

			// Sort orders by submission time both ways.
			asc := fetchTimes(t, c, formID, forms.ListParams{Limit: 50, Sort: forms.SortAsc})
			desc := fetchTimes(t, c, formID, forms.ListParams{Limit: 50, Sort: forms.SortDesc})
			if !slices.IsSortedFunc(asc, time.Time.Compare) {
				t.Error("sort=asc is not ascending")
			}
			if !slices.IsSortedFunc(desc, func(a, b time.Time) int { return b.Compare(a) }) {
				t.Error("sort=desc is not descending")
			}

			// A date window: the service's inclusivity is unknown, so check
			// only that nothing outside the closed window comes back and that
			// everything strictly inside does.
			all := fetchAll(t, c, formID)
			lo, hi := all[len(all)/4].SubmissionTime, all[3*len(all)/4].SubmissionTime
			inWindow := fetchAllParams(t, c, formID, forms.ListParams{AfterDate: &lo, BeforeDate: &hi})
			seen := map[string]bool{}
			for _, s := range inWindow {
				if s.SubmissionTime.Before(lo.Truncate(time.Millisecond)) || s.SubmissionTime.After(hi) {
					t.Errorf("submission %s at %v outside [%v, %v]", s.SubmissionID, s.SubmissionTime, lo, hi)
				}
				seen[s.SubmissionID] = true
			}
			for _, s := range all {
				if s.SubmissionTime.After(lo) && s.SubmissionTime.Before(hi) && !seen[s.SubmissionID] {
					t.Errorf("submission %s at %v missing from the window", s.SubmissionID, s.SubmissionTime)
				}
			}

			// Edit links, one submission, and search.
			first := all[0]
			withLink, err := c.ListSubmissions(ctx, formID, forms.ListParams{Limit: 5, IncludeEditLink: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range withLink.Responses {
				if s.EditLink == "" {
					t.Errorf("includeEditLink: submission %s has no editLink", s.SubmissionID)
				}
			}
			one, err := c.GetSubmission(ctx, formID, first.SubmissionID, true)
			if err != nil {
				t.Fatal(err)
			}
			if one.SubmissionID != first.SubmissionID || !one.SubmissionTime.Equal(first.SubmissionTime) || one.EditLink == "" {
				t.Errorf("GetSubmission = %+v, listed %+v", one, first)
			}
			if term := searchTerm(first); term != "" {
				found := fetchAllParams(t, c, formID, forms.ListParams{Search: term})
				if !slices.ContainsFunc(found, func(s forms.Submission) bool { return s.SubmissionID == first.SubmissionID }) {
					t.Errorf("search %q did not find submission %s", term, first.SubmissionID)
				}
				if len(found) > len(all) {
					t.Errorf("search returned %d of %d", len(found), len(all))
				}
			}

			// The other status and previews decode too.
			for _, p := range []forms.ListParams{{Status: forms.StatusInProgress}, {Status: forms.StatusFinished, IncludePreview: true}} {
				if _, err := c.ListSubmissions(ctx, formID, p); err != nil {
					t.Errorf("%+v: %v", p, err)
				}
			}
		})
	}
}

func fetchTimes(t *testing.T, c *forms.Client, formID string, p forms.ListParams) []time.Time {
	t.Helper()
	page, err := c.ListSubmissions(context.Background(), formID, p)
	if err != nil {
		t.Fatal(err)
	}
	var ts []time.Time
	for _, s := range page.Responses {
		ts = append(ts, s.SubmissionTime)
	}
	if len(ts) < 2 {
		t.Fatalf("only %d submissions to compare", len(ts))
	}
	return ts
}

func fetchAll(t *testing.T, c *forms.Client, formID string) []forms.Submission {
	return fetchAllParams(t, c, formID, forms.ListParams{})
}

func fetchAllParams(t *testing.T, c *forms.Client, formID string, p forms.ListParams) []forms.Submission {
	t.Helper()
	var out []forms.Submission
	p.Sort, p.Limit = forms.SortAsc, forms.MaxListLimit
	for p.Offset = 0; ; {
		page, err := c.ListSubmissions(context.Background(), formID, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Responses...)
		p.Offset += len(page.Responses)
		if len(page.Responses) < p.Limit || p.Offset >= page.TotalResponses {
			return out
		}
	}
}

// searchTerm picks a string answer of s to search for.
func searchTerm(s forms.Submission) string {
	for _, a := range s.Questions {
		var v string
		if json.Unmarshal(a.Value, &v) == nil && len(v) >= 4 {
			return v
		}
	}
	return ""
}

func TestSimWriteEndpoints(t *testing.T) {
	sim, base := startSim(t, formsim.Config{Seed: 3, Forms: 1, Submissions: 20})
	c := simClient(t, base)
	ctx := context.Background()
	formID := sim.FormIDs()[0]
	form, err := c.GetForm(ctx, formID)
	if err != nil {
		t.Fatal(err)
	}
	before := len(sim.ExpectedIDs(formID))

	at := simStart.Add(36 * time.Hour)
	value, _ := json.Marshal("imported answer")
	created, err := c.CreateSubmissions(ctx, formID, []forms.NewSubmission{
		{Questions: []forms.NewAnswer{{ID: form.Questions[0].ID, Value: value}}, SubmissionTime: &at},
		{Questions: []forms.NewAnswer{{ID: form.Questions[0].ID, Value: value}}, SubmissionTime: &at},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 2 || created[0].SubmissionID == "" {
		t.Fatalf("created = %+v", created)
	}
	if n := len(sim.ExpectedIDs(formID)); n != before+2 {
		t.Errorf("simulator holds %d submissions after importing 2 into %d", n, before)
	}
	got, err := c.GetSubmission(ctx, formID, created[0].SubmissionID, false)
	if err != nil {
		t.Fatal(err)
	}
	if !got.SubmissionTime.Equal(at) {
		t.Errorf("imported submission time %v, sent %v", got.SubmissionTime, at)
	}

	if err := c.DeleteSubmission(ctx, formID, created[0].SubmissionID); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSubmission(ctx, formID, created[0].SubmissionID, false)
	var nf *forms.NotFoundError
	if !errors.As(err, &nf) || nf.What != "submission" {
		t.Errorf("after delete: %v, want a NotFoundError for the submission", err)
	}

	id, err := c.CreateWebhook(ctx, formID, "https://hooks.example.com/in")
	if err != nil {
		t.Fatal(err)
	}
	if id <= 0 {
		t.Errorf("webhook id %d", id)
	}
	if err := c.DeleteWebhook(ctx, id); err != nil {
		t.Fatal(err)
	}

	_, err = c.CreateSubmissions(ctx, formID, make([]forms.NewSubmission, forms.MaxCreateBatch+1))
	if err == nil {
		t.Error("11 submissions accepted")
	}
}

func TestSimTypedErrors(t *testing.T) {
	_, base := startSim(t, formsim.Config{Seed: 1, Forms: 1, Submissions: 5})
	ctx := context.Background()

	_, err := simClient(t, base, func(c *forms.Config) { c.APIKey = "sk_test_WRONG" }).ListForms(ctx)
	if !errors.Is(err, forms.ErrUnauthorized) {
		t.Errorf("wrong key: %v", err)
	}
	c := simClient(t, base)
	if _, err := c.GetForm(ctx, "no-such-form"); !errors.Is(err, forms.ErrNotFound) {
		t.Errorf("unknown form: %v", err)
	}
	if _, err := c.ListSubmissions(ctx, "no-such-form", forms.ListParams{}); !errors.Is(err, forms.ErrNotFound) {
		t.Errorf("unknown form: %v", err)
	}
}

// A client whose limit is at or below the simulator's receives no 429 over
// a run of at least 200 requests: asserted by the simulator's own counters.
// Several goroutines and two clients share the key's limiter, as forms do in
// syncd.
func TestSimNoRateLimitingAtTheLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("about 4 s of paced requests")
	}
	// The simulator allows a second's burst, as the service does: a
	// tighter one would judge the test machine's scheduling jitter (a
	// goroutine run 100 ms late), not the client's pacing.
	const rps, requests = 50, 210
	sim, base := startSim(t, formsim.Config{Seed: 5, Forms: 3, Submissions: 30, RateLimit: rps, RateBurst: rps})
	reg := forms.NewLimiters()
	shared := func(c *forms.Config) { c.RateLimit, c.Burst, c.Limiters = rps, 1, reg }
	clients := []*forms.Client{simClient(t, base, shared), simClient(t, base, shared)}
	ids := sim.FormIDs()

	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[i%len(clients)]
			if _, err := c.ListSubmissions(context.Background(), ids[i%len(ids)], forms.ListParams{Limit: 1}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := sim.Stats()
	if st.Requests < requests {
		t.Errorf("simulator saw %d requests, want >= %d", st.Requests, requests)
	}
	if st.RateLimited != 0 || st.ByStatus[429] != 0 {
		t.Errorf("simulator answered 429 %d times (RateLimited %d)", st.ByStatus[429], st.RateLimited)
	}
}

// With the simulator injecting 5xx, 429 and truncated or malformed bodies,
// paging still returns exactly the expected submissions.
func TestSimFaultsAreRetried(t *testing.T) {
	sim, base := startSim(t, formsim.Config{Seed: 11, Forms: 1, Submissions: 600})
	sim.SetFaults(formsim.Faults{
		ServerErrorRate: 0.15,
		RateLimitRate:   0.1,
		TruncateRate:    0.1,
		MalformedRate:   0.05,
	})
	c := simClient(t, base, func(c *forms.Config) { c.MaxAttempts = 12 })
	formID := sim.FormIDs()[0]
	got := listAll(t, c, formID, forms.ListParams{Limit: 50})
	if want := sim.ExpectedIDs(formID); !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("paged %d ids under faults, simulator expects %d", len(got), len(want))
	}
	if st := sim.Stats(); st.InjectedErrors == 0 {
		t.Fatal("no fault was injected: the test exercised nothing")
	}
}
