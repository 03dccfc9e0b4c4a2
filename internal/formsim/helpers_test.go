package formsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

const testKey = "sk_test_FORMSIM_SECRET"

var (
	testStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	testEnd   = time.Date(2024, 2, 1, 0, 0, 0, 0, time.UTC)
	testNow   = time.Date(2024, 2, 10, 12, 0, 0, 0, time.UTC)
)

// testConfig is a small account on a fixed calendar and a frozen clock.
func testConfig(seed int64, nForms, subs int) Config {
	return Config{APIKey: testKey, Seed: seed, Forms: nForms, Submissions: subs, Start: testStart, End: testEnd,
		Now: func() time.Time { return testNow }}
}

type sim struct {
	*Server
	base string
}

// start serves a simulator on loopback; both stop at cleanup.
func start(t testing.TB, cfg Config) *sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(func() {
		ts.Close()
		_ = s.Close()
	})
	return &sim{Server: s, base: ts.URL + BasePath}
}

// do makes one request with the test key and returns status, body and header.
func (s *sim) do(t testing.TB, method, path string, body any) (int, []byte, http.Header) {
	t.Helper()
	return s.doKey(t, method, path, body, "Bearer "+testKey)
}

func (s *sim) doKey(t testing.TB, method, path string, body any, auth string) (int, []byte, http.Header) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, out, resp.Header
}

// getJSON GETs path, requires 200 and decodes the body into v.
func (s *sim) getJSON(t testing.TB, path string, v any) []byte {
	t.Helper()
	status, body, _ := s.do(t, http.MethodGet, path, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode: %v\n%.300s", path, err, body)
	}
	return body
}

func (s *sim) page(t testing.TB, formID string, q url.Values) forms.SubmissionPage {
	t.Helper()
	var p forms.SubmissionPage
	s.getJSON(t, "/forms/"+formID+"/submissions?"+q.Encode(), &p)
	return p
}

// walk pages through a form with the given query and returns every
// submission in order.
func (s *sim) walk(t testing.TB, formID string, q url.Values, limit int) []forms.Submission {
	t.Helper()
	var out []forms.Submission
	q.Set("limit", strconv.Itoa(limit))
	for offset := 0; ; offset += limit {
		q.Set("offset", strconv.Itoa(offset))
		p := s.page(t, formID, q)
		out = append(out, p.Responses...)
		if want := (p.TotalResponses + limit - 1) / limit; p.PageCount != want {
			t.Fatalf("pageCount %d for total %d and limit %d", p.PageCount, p.TotalResponses, limit)
		}
		if offset+limit >= p.TotalResponses {
			if len(out) != p.TotalResponses {
				t.Fatalf("walked %d submissions, totalResponses says %d", len(out), p.TotalResponses)
			}
			return out
		}
		if len(p.Responses) != limit {
			t.Fatalf("page at offset %d holds %d, want %d", offset, len(p.Responses), limit)
		}
	}
}

func ids(subs []forms.Submission) []string {
	out := make([]string, len(subs))
	for i, s := range subs {
		out[i] = s.SubmissionID
	}
	return out
}

// messageOf decodes an error body and fails unless it is {"message": "..."}.
func messageOf(t testing.TB, body []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("error body is not JSON: %q", body)
	}
	msg, ok := m["message"].(string)
	if !ok || msg == "" || len(m) != 1 {
		t.Fatalf(`error body %s is not {"message": "..."}`, body)
	}
	return msg
}

func readAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }

// httptestServer serves h on loopback until cleanup and returns its URL.
func httptestServer(t testing.TB, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}
