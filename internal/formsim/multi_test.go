package formsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startMulti serves a Multi of one small workspace per key, with seeds
// 1, 2, ...; both stop at cleanup.
func startMulti(t *testing.T, rateLimit float64, burst int, keys ...string) (*Multi, string) {
	t.Helper()
	cfgs := make([]Config, len(keys))
	for i, k := range keys {
		cfgs[i] = testConfig(int64(i+1), 2, 20)
		cfgs[i].APIKey = k
		cfgs[i].RateLimit, cfgs[i].RateBurst = rateLimit, burst
	}
	m, err := NewMulti(cfgs...)
	if err != nil {
		t.Fatalf("NewMulti: %v", err)
	}
	ts := httptest.NewServer(m)
	t.Cleanup(func() {
		ts.Close()
		_ = m.Close()
	})
	return m, ts.URL + BasePath
}

func TestNewMultiRefuses(t *testing.T) {
	good := func(key string) Config { c := testConfig(1, 1, 1); c.APIKey = key; return c }
	for _, tc := range []struct {
		name string
		cfgs []Config
	}{
		{"no workspaces", nil},
		{"empty key", []Config{good("a"), good("")}},
		{"duplicate key", []Config{good("a"), good("b"), good("a")}},
		{"negative rate", []Config{func() Config { c := good("a"); c.RateLimit = -1; return c }()}},
		{"bad workspace", []Config{func() Config { c := good("a"); c.Forms = -1; return c }()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := NewMulti(tc.cfgs...); err == nil {
				m.Close()
				t.Fatal("NewMulti succeeded")
			}
		})
	}
}

func TestMultiIsolatesWorkspaces(t *testing.T) {
	m, base := startMulti(t, 0, 0, "key-a", "key-b")
	c := &sim{base: base}
	formsA, formsB := m.Workspace("key-a").FormIDs(), m.Workspace("key-b").FormIDs()
	if slices.Equal(formsA, formsB) {
		t.Fatalf("both workspaces have forms %v; seeds should differ", formsA)
	}
	if m.Workspace("key-c") != nil {
		t.Error("Workspace of an unknown key is not nil")
	}
	if got := m.Keys(); !slices.Equal(got, []string{"key-a", "key-b"}) {
		t.Errorf("Keys = %v", got)
	}

	// A single Server's 401, which Multi must answer exactly for an unknown key.
	single := start(t, testConfig(1, 1, 1))
	_, want401, _ := single.doKey(t, http.MethodGet, "/forms", nil, "Bearer nope")

	for _, tc := range []struct {
		name, auth, path string
		status           int
		body             string // "" = not checked
	}{
		{"A lists its forms", "Bearer key-a", "/forms", 200, ""},
		{"A reads its form", "Bearer key-a", "/forms/" + formsA[0], 200, ""},
		{"A cannot read B's form", "Bearer key-a", "/forms/" + formsB[0], 404, ""},
		{"A cannot list B's submissions", "Bearer key-a", "/forms/" + formsB[0] + "/submissions", 404, ""},
		{"B reads its form", "Bearer key-b", "/forms/" + formsB[0], 200, ""},
		{"unknown key", "Bearer nope", "/forms", 401, string(want401)},
		{"no key", "", "/forms", 401, string(want401)},
		{"key without Bearer", "key-a", "/forms", 401, string(want401)},
		{"prefix of a key", "Bearer key-", "/forms", 401, string(want401)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := c.doKey(t, http.MethodGet, tc.path, nil, tc.auth)
			if status != tc.status || tc.body != "" && string(body) != tc.body {
				t.Fatalf("%d %s, want %d %s", status, body, tc.status, tc.body)
			}
		})
	}

	var listed []struct {
		FormID string `json:"formId"`
	}
	_, body, _ := c.doKey(t, http.MethodGet, "/forms", nil, "Bearer key-b")
	if err := json.Unmarshal(body, &listed); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range listed {
		ids = append(ids, f.FormID)
	}
	if !slices.Equal(ids, formsB) {
		t.Errorf("key-b lists %v, want its own %v", ids, formsB)
	}
	a, _ := m.Stats("key-a")
	b, _ := m.Stats("key-b")
	if a.Requests != 4 || a.Admitted != 4 || b.Requests != 2 || b.Admitted != 2 {
		t.Errorf("stats: a %+v, b %+v", a, b)
	}
	if _, ok := m.Stats("nope"); ok {
		t.Error("Stats of an unknown key reports ok")
	}
}

// TestMultiRateLimitConcurrent: 20 clients on one key get no more than the
// limiter allows in any second, as the sim measures it, and do not slow
// another key down.
func TestMultiRateLimitConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 2s")
	}
	const limit, burst = ServiceRateLimit, 5
	m, base := startMulti(t, limit, burst, "key-a", "key-b")
	form := m.Workspace("key-a").FormIDs()[0]
	ctx, cancel := context.WithTimeout(t.Context(), 2100*time.Millisecond)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer hc.CloseIdleConnections()

	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/forms/"+form+"/submissions?limit=5", nil)
				req.Header.Set("Authorization", "Bearer key-a")
				resp, err := hc.Do(req)
				if err != nil {
					continue // the deadline cut the request short
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	// Meanwhile key-b, paced within its limit, is never refused.
	var bRefused int
	for range 4 {
		time.Sleep(250 * time.Millisecond)
		c := &sim{base: base}
		if status, _, _ := c.doKey(t, http.MethodGet, "/forms", nil, "Bearer key-b"); status != http.StatusOK {
			bRefused++
		}
	}
	wg.Wait()

	st, _ := m.Stats("key-a")
	t.Logf("key-a: %d ok, %d limited; stats %+v", ok.Load(), limited.Load(), st)
	if st.MaxPerSecond > limit+burst {
		t.Errorf("the sim admitted %d requests in one second, more than limit %d + burst %d", st.MaxPerSecond, limit, burst)
	}
	if st.MaxPerSecond < burst || st.RateLimited == 0 || limited.Load() == 0 {
		t.Errorf("20 clients never hit the limit: %+v", st)
	}
	if other.Load() != 0 {
		t.Errorf("%d answers were neither 200 nor 429", other.Load())
	}
	// Client-side counts can miss answers the deadline cut off, never exceed.
	if ok.Load() > st.Admitted || st.Requests != st.Admitted+st.RateLimited {
		t.Errorf("client saw %d ok; stats %+v", ok.Load(), st)
	}
	if st.MaxInFlight < 1 || st.MaxInFlight > 20 {
		t.Errorf("MaxInFlight = %d, want 1..20", st.MaxInFlight)
	}
	if bRefused != 0 {
		t.Errorf("key-b was refused %d times while key-a was flooded", bRefused)
	}
	if b := m.AllStats()["key-b"]; b.Requests != 4 || b.RateLimited != 0 {
		t.Errorf("key-b stats %+v", b)
	}
}

// TestMultiWindow checks the sliding-window measure on chosen instants.
func TestMultiWindow(t *testing.T) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms ...int) []time.Time {
		out := make([]time.Time, len(ms))
		for i, v := range ms {
			out[i] = t0.Add(time.Duration(v) * time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		times []time.Time
		want  int
	}{
		{"one", at(0), 1},
		{"spread a second apart", at(0, 1000, 2000, 3000), 1},
		{"just inside a second", at(0, 999), 2},
		{"burst then trickle", at(0, 0, 0, 200, 400, 1000, 1001), 5},
		{"two bursts apart", at(0, 0, 0, 1500, 1500), 3},
		{"sliding", at(0, 300, 600, 900, 1200, 1500), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks := &keyState{key: []byte("k")}
			for _, now := range tc.times {
				if ks.admit(now, "c") != admitted {
					t.Fatal("refused without a limiter")
				}
				ks.done("c")
			}
			if ks.stats.MaxPerSecond != tc.want || ks.stats.MaxInFlight != 1 {
				t.Errorf("MaxPerSecond %d, MaxInFlight %d; want %d, 1", ks.stats.MaxPerSecond, ks.stats.MaxInFlight, tc.want)
			}
		})
	}
}

func TestMultiRevoke(t *testing.T) {
	m, base := startMulti(t, 0, 0, "key-a", "key-b")
	c := &sim{base: base}
	if m.Revoke("nope") {
		t.Error("Revoke of an unknown key reports true")
	}
	if status, _, _ := c.doKey(t, http.MethodGet, "/forms", nil, "Bearer key-a"); status != http.StatusOK {
		t.Fatalf("before revoking: %d", status)
	}
	if !m.Revoke("key-a") {
		t.Fatal("Revoke of a known key reports false")
	}
	for i, tc := range []struct {
		auth   string
		status int
		msg    string
	}{
		{"Bearer key-a", 401, "Unauthorized: API key has been revoked"},
		{"Bearer key-b", 200, ""},
	} {
		status, body, _ := c.doKey(t, http.MethodGet, "/forms", nil, tc.auth)
		var got struct{ Message string }
		if tc.msg != "" {
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("%d: %s is not the error shape: %v", i, body, err)
			}
		}
		if status != tc.status || got.Message != tc.msg {
			t.Errorf("%s: %d %q, want %d %q", tc.auth, status, got.Message, tc.status, tc.msg)
		}
	}
	st, _ := m.Stats("key-a")
	if want := (KeyStats{Requests: 2, Revoked: 1, Admitted: 1, MaxPerSecond: 1, MaxInFlight: 1, Clients: 1}); st != want {
		t.Errorf("stats %+v, want %+v", st, want)
	}
}

// ExampleMulti shows two accounts behind one handler.
func ExampleMulti() {
	m, err := NewMulti(
		Config{APIKey: "key-a", Seed: 1, Forms: 1, Submissions: 10, RateLimit: ServiceRateLimit},
		Config{APIKey: "key-b", Seed: 2, Forms: 2, Submissions: 10, RateLimit: ServiceRateLimit},
	)
	if err != nil {
		panic(err)
	}
	defer m.Close()
	for _, k := range m.Keys() {
		fmt.Println(k, len(m.Workspace(k).FormIDs()))
	}
	// Output:
	// key-a 1
	// key-b 2
}

// TestMultiCountsOverlappingClients: requests of two clients (User-Agents)
// of one key in flight at once are counted; one client's concurrency is not.
func TestMultiCountsOverlappingClients(t *testing.T) {
	m, err := NewMulti(Config{APIKey: "k1", Forms: 1, Submissions: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ks := m.lookup("k1")
	ks.admit(time.Now(), "syncd-a")
	ks.admit(time.Now(), "syncd-a")
	if st, _ := m.Stats("k1"); st.Overlaps != 0 || st.Clients != 1 {
		t.Errorf("one client's two requests: overlaps %d, clients %d; want 0, 1", st.Overlaps, st.Clients)
	}
	ks.admit(time.Now(), "syncd-b")
	ks.done("syncd-a")
	ks.done("syncd-a")
	ks.done("syncd-b")
	ks.admit(time.Now(), "syncd-a")
	ks.done("syncd-a")
	if st, _ := m.Stats("k1"); st.Overlaps != 1 || st.Clients != 2 {
		t.Errorf("overlaps %d, clients %d; want 1 (b while a was in flight), 2", st.Overlaps, st.Clients)
	}
}
