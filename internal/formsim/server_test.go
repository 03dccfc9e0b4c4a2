package formsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

func TestNewValidatesConfig(t *testing.T) {
	ok := testConfig(1, 1, 10)
	cases := []struct {
		name string
		edit func(*Config)
	}{
		{"no key", func(c *Config) { c.APIKey = "" }},
		{"negative forms", func(c *Config) { c.Forms = -1 }},
		{"negative submissions", func(c *Config) { c.Submissions = -5 }},
		{"too many submissions", func(c *Config) { c.Submissions = MaxSubmissions + 1 }},
		{"negative rate", func(c *Config) { c.RateLimit = -1 }},
		{"negative burst", func(c *Config) { c.RateBurst = -1 }},
		{"end before start", func(c *Config) { c.Start, c.End = c.End, c.Start }},
		{"empty range", func(c *Config) { c.End = c.Start }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			if s, err := New(cfg); err == nil {
				s.Close()
				t.Fatal("New accepted the config")
			} else if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q shows the key", err)
			}
		})
	}
	s, err := New(Config{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := len(s.FormIDs()); got != 3 {
		t.Errorf("default Forms: %d forms", got)
	}
	if got := len(s.ExpectedIDs(s.FormIDs()[0])); got != 1000 {
		t.Errorf("default Submissions: %d finished submissions", got)
	}
}

// Every endpoint refuses a missing or wrong key with 401 and a JSON message
// that does not echo the key.
func TestAuth(t *testing.T) {
	s := start(t, testConfig(1, 1, 20))
	form := s.FormIDs()[0]
	sub := s.ExpectedIDs(form)[0]
	endpoints := []struct{ method, path, body string }{
		{"GET", "/forms", ""},
		{"GET", "/forms/" + form, ""},
		{"GET", "/forms/" + form + "/submissions", ""},
		{"GET", "/forms/" + form + "/submissions/" + sub, ""},
		{"POST", "/forms/" + form + "/submissions", `{"submissions":[{}]}`},
		{"DELETE", "/forms/" + form + "/submissions/" + sub, ""},
		{"POST", "/webhook/create", `{"formId":"` + form + `","url":"http://127.0.0.1:1/"}`},
		{"POST", "/webhook/delete", `{"webhookId":1}`},
		{"GET", "/nope", ""},
	}
	for _, e := range endpoints {
		for _, auth := range []string{"", "Bearer wrong_key", testKey, "Basic " + testKey, "Bearer " + testKey + "x", "bearer " + testKey} {
			status, body, _ := s.doKey(t, e.method, e.path, e.body, auth)
			if status != http.StatusUnauthorized {
				t.Errorf("%s %s with %q: %d, want 401", e.method, e.path, auth, status)
				continue
			}
			if msg := messageOf(t, body); strings.Contains(msg, testKey) || strings.Contains(msg, "wrong_key") {
				t.Errorf("401 message %q echoes the key", msg)
			}
		}
	}
	if n := len(s.ExpectedIDs(form)); n != 20 {
		t.Errorf("unauthorised calls changed the data: %d submissions", n)
	}
	if st := s.Stats(); st.ByStatus[401] != int64(len(endpoints)*6) || st.Requests != st.ByStatus[401] {
		t.Errorf("stats %+v", st)
	}
}

func TestRoutingErrors(t *testing.T) {
	s := start(t, testConfig(1, 1, 5))
	form := s.FormIDs()[0]
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/", 404, ""},
		{"GET", "/form", 404, ""},
		{"GET", "/forms/" + form + "/answers", 404, ""},
		{"GET", "/forms//submissions", 404, ""},
		{"GET", "/forms/nope", 404, ""},
		{"GET", "/forms/nope/submissions", 404, ""},
		{"GET", "/forms/" + form + "/submissions/nope", 404, ""},
		{"GET", "/forms/" + form + "/submissions/" + strings.Repeat("0", 36), 404, ""},
		{"DELETE", "/forms/" + form + "/submissions/nope", 404, ""},
		{"POST", "/forms", 405, "GET"},
		{"PUT", "/forms/" + form, 405, "GET"},
		{"DELETE", "/forms/" + form + "/submissions", 405, "GET, POST"},
		{"POST", "/forms/" + form + "/submissions/x", 405, "GET, DELETE"},
		{"GET", "/webhook/create", 405, "POST"},
		{"GET", "/webhook/list", 404, ""},
	}
	for _, tc := range cases {
		status, body, h := s.do(t, tc.method, tc.path, nil)
		if status != tc.status || h.Get("Allow") != tc.allow {
			t.Errorf("%s %s: %d Allow %q, want %d %q", tc.method, tc.path, status, h.Get("Allow"), tc.status, tc.allow)
		}
		messageOf(t, body)
	}
	// A submission id of another form is unknown in this one.
	s2 := start(t, testConfig(1, 2, 5))
	other := s2.ExpectedIDs(s2.FormIDs()[1])[0]
	if status, _, _ := s2.do(t, "GET", "/forms/"+s2.FormIDs()[0]+"/submissions/"+other, nil); status != 404 {
		t.Errorf("a submission of form 1 read through form 0: %d", status)
	}
}

func TestListForms(t *testing.T) {
	s := start(t, testConfig(3, 4, 5))
	var raw []map[string]json.RawMessage
	s.getJSON(t, "/forms", &raw)
	var list []forms.FormSummary
	s.getJSON(t, "/forms", &list)
	if len(list) != 4 {
		t.Fatalf("%d forms", len(list))
	}
	for i, f := range list {
		if f.FormID != s.FormIDs()[i] || f.Name == "" {
			t.Errorf("form %d: %+v", i, f)
		}
		if _, ok := raw[i]["tags"]; !ok || len(raw[i]) != 3 {
			t.Errorf("form %d: keys %v, want formId, name, tags", i, raw[i])
		}
	}
}

func TestMetadata(t *testing.T) {
	s := start(t, testConfig(5, 3, 10))
	var meta forms.Form
	s.getJSON(t, "/forms/"+s.FormIDs()[0], &meta)
	if direct, _ := s.Form(meta.ID); !equalJSON(t, direct, meta) {
		t.Errorf("Form() and GET /forms/{id} differ")
	}

	types := map[string]bool{}
	names := map[string]bool{}
	qids := map[string]bool{}
	for _, q := range meta.Questions {
		types[q.Type] = true
		names[q.Name] = true
		if q.ID == "" || qids[q.ID] {
			t.Errorf("question id %q empty or repeated", q.ID)
		}
		qids[q.ID] = true
	}
	documented := DocumentedTypes()
	if len(documented) != 38 {
		t.Fatalf("%d documented types, the field notes list 38", len(documented))
	}
	for _, typ := range documented {
		if !types[typ] {
			t.Errorf("form 0 has no %s question", typ)
		}
	}
	var caseTwin, accent, digit bool
	for n := range names {
		caseTwin = caseTwin || (n != strings.ToLower(n) && names[strings.ToLower(n)])
		accent = accent || strings.ContainsAny(n, "éèàç€★")
		digit = digit || (n[0] >= '0' && n[0] <= '9')
	}
	if !caseTwin || !accent || !digit {
		t.Errorf("question names lack a case twin (%v), an accent (%v) or a leading digit (%v)", caseTwin, accent, digit)
	}
	calcTypes := map[string]bool{}
	for _, c := range meta.Calculations {
		calcTypes[c.Type] = true
	}
	if !calcTypes["number"] || !calcTypes["text"] || !calcTypes["duration"] {
		t.Errorf("calculations %+v", meta.Calculations)
	}
	if len(meta.URLParameters) == 0 || len(meta.Scheduling) == 0 || len(meta.Payments) == 0 || meta.Quiz == nil || !meta.Quiz.Enabled {
		t.Errorf("form 0 lacks a feature: %+v", meta)
	}

	// The other forms are narrower but always have text and number questions.
	for _, id := range s.FormIDs()[1:] {
		m, _ := s.Form(id)
		var text, number bool
		for _, q := range m.Questions {
			text = text || q.Type == "ShortAnswer"
			number = number || q.Type == "NumberInput"
		}
		if n := len(m.Questions); n < 5 || n > 10 || !text || !number {
			t.Errorf("form %s: %d questions, text %v, number %v", id, n, text, number)
		}
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return bytes.Equal(x, y)
}

// Paging with a small limit over a form with many ties returns every
// submission exactly once, in order, both ways.
func TestPagingIsExactOverTies(t *testing.T) {
	s := start(t, testConfig(11, 1, 1000))
	form := s.FormIDs()[0]
	want := s.ExpectedIDs(form)
	if len(want) != 1000 {
		t.Fatalf("%d expected ids", len(want))
	}
	asc := s.walk(t, form, url.Values{"sort": {"asc"}}, 7)
	if got := ids(asc); !slices.Equal(got, want) {
		t.Fatalf("asc paging returned %d ids, not the %d expected in order", len(got), len(want))
	}
	ties, group, bigGroups := 0, 1, 0
	for i := 1; i < len(asc); i++ {
		switch c := asc[i].SubmissionTime.Compare(asc[i-1].SubmissionTime); {
		case c < 0:
			t.Fatalf("asc: %s before %s", asc[i].SubmissionTime, asc[i-1].SubmissionTime)
		case c == 0:
			ties++
			if group++; group == 3 {
				bigGroups++
			}
		default:
			group = 1
		}
	}
	if ties < 10 || bigGroups == 0 {
		t.Errorf("%d ties and %d groups of 3+: the test needs both", ties, bigGroups)
	}
	desc := s.walk(t, form, url.Values{"sort": {"desc"}}, 13)
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if got := ids(desc); !slices.Equal(got, rev) {
		t.Fatal("desc paging is not the exact reverse of asc")
	}
	def := s.walk(t, form, url.Values{}, 150)
	if !slices.Equal(ids(def), want) {
		t.Fatal("default sort is not ascending")
	}
	// Beyond the end: an empty page that still counts.
	p := s.page(t, form, url.Values{"offset": {"5000"}, "limit": {"10"}})
	if len(p.Responses) != 0 || p.TotalResponses != 1000 || p.PageCount != 100 {
		t.Errorf("offset past the end: %d rows, total %d, pages %d", len(p.Responses), p.TotalResponses, p.PageCount)
	}
	if p := s.page(t, form, url.Values{}); len(p.Responses) != 50 {
		t.Errorf("default limit: %d rows", len(p.Responses))
	}
	if st := s.Stats(); st.PagesServed == 0 || st.SubmissionsServed < 3000 {
		t.Errorf("stats %+v", st)
	}
}

func TestListParameterErrors(t *testing.T) {
	s := start(t, testConfig(1, 1, 5))
	form := s.FormIDs()[0]
	bad := []string{
		"limit=0", "limit=151", "limit=-1", "limit=abc", "limit=1e2", "limit=99999999999999999999",
		"offset=-1", "offset=x", "offset=99999999999999999999",
		"afterDate=yesterday", "afterDate=2024-01-01", "beforeDate=2024-13-01T00:00:00Z", "beforeDate=1704067200",
		"status=done", "status=FINISHED", "sort=up", "includePreview=maybe", "includeEditLink=2",
	}
	for _, q := range bad {
		status, body, _ := s.do(t, "GET", "/forms/"+form+"/submissions?"+q, nil)
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, status)
			continue
		}
		messageOf(t, body)
	}
	good := []string{"limit=1", "limit=150", "offset=0", "afterDate=2024-01-01T00:00:00.000Z",
		"afterDate=2024-01-01T00:00:00Z", "beforeDate=2024-01-01T02:00:00%2B02:00", "beforeDate=9999-12-31T23:59:59.999999999Z",
		"afterDate=0001-01-01T00:00:00Z", "status=finished", "status=in_progress", "sort=asc", "sort=desc",
		"includePreview=true", "includePreview=false", "includeEditLink=1", "search=", "search=%00%22%5C"}
	for _, q := range good {
		if status, body, _ := s.do(t, "GET", "/forms/"+form+"/submissions?"+q, nil); status != http.StatusOK {
			t.Errorf("%s: %d %s", q, status, body)
		}
	}
	if s.Stats().ByStatus[400] != int64(len(bad)) {
		t.Errorf("400s counted: %d", s.Stats().ByStatus[400])
	}
}

// At a tie boundary, the inclusive reading keeps every submission at the
// boundary instant and the exclusive one none of them.
func TestDateFilterInclusivity(t *testing.T) {
	for _, inclusive := range []bool{false, true} {
		cfg := testConfig(11, 1, 1000)
		cfg.InclusiveDates = inclusive
		s := start(t, cfg)
		form := s.FormIDs()[0]
		all := s.walk(t, form, url.Values{}, 150)
		// A time shared by several submissions.
		var at time.Time
		for i := 2; i < len(all); i++ {
			if all[i].SubmissionTime.Equal(all[i-2].SubmissionTime) {
				at = all[i].SubmissionTime
				break
			}
		}
		if at.IsZero() {
			t.Fatal("no group of three tied submissions")
		}
		countIf := func(keep func(time.Time) bool) int {
			n := 0
			for _, sub := range all {
				if keep(sub.SubmissionTime) {
					n++
				}
			}
			return n
		}
		formats := []string{at.Format(forms.DateLayout), at.Format(time.RFC3339Nano), at.In(time.FixedZone("", 5*3600+1800)).Format(time.RFC3339Nano)}
		for _, f := range formats {
			after := s.page(t, form, url.Values{"afterDate": {f}, "limit": {"1"}}).TotalResponses
			before := s.page(t, form, url.Values{"beforeDate": {f}, "limit": {"1"}}).TotalResponses
			both := s.page(t, form, url.Values{"afterDate": {f}, "beforeDate": {f}, "limit": {"1"}}).TotalResponses
			wantAfter := countIf(func(x time.Time) bool { return x.After(at) })
			wantBefore := countIf(func(x time.Time) bool { return x.Before(at) })
			wantBoth := 0
			if inclusive {
				wantAfter += countIf(at.Equal)
				wantBefore += countIf(at.Equal)
				wantBoth = countIf(at.Equal)
			}
			if after != wantAfter || before != wantBefore || both != wantBoth {
				t.Errorf("inclusive=%v at %s: after %d before %d both %d; want %d %d %d", inclusive, f, after, before, both, wantAfter, wantBefore, wantBoth)
			}
		}
		// Sub-millisecond bounds compare exactly, whichever reading.
		mid := at.Add(500 * time.Microsecond).Format(time.RFC3339Nano)
		if got, want := s.page(t, form, url.Values{"afterDate": {mid}, "limit": {"1"}}).TotalResponses, countIf(func(x time.Time) bool { return x.After(at) }); got != want {
			t.Errorf("afterDate %s: %d, want %d", mid, got, want)
		}
		// The filtered window pages exactly like the whole list restricted.
		lo, hi := all[100].SubmissionTime, all[700].SubmissionTime
		got := s.walk(t, form, url.Values{"afterDate": {lo.Format(forms.DateLayout)}, "beforeDate": {hi.Format(forms.DateLayout)}}, 37)
		var want []string
		for _, sub := range all {
			tm := sub.SubmissionTime
			in := tm.After(lo) && tm.Before(hi) || inclusive && (tm.Equal(lo) || tm.Equal(hi))
			if in {
				want = append(want, sub.SubmissionID)
			}
		}
		if !slices.Equal(ids(got), want) {
			t.Errorf("inclusive=%v: window paged %d ids, want %d", inclusive, len(got), len(want))
		}
		between := s.ExpectedIDsBetween(form, lo, hi)
		if len(between) == 0 || between[0] != all[slices.IndexFunc(all, func(x forms.Submission) bool { return x.SubmissionTime.Equal(lo) })].SubmissionID {
			t.Errorf("ExpectedIDsBetween is not half-open from lo")
		}
		for _, id := range between {
			i := slices.IndexFunc(all, func(x forms.Submission) bool { return x.SubmissionID == id })
			if tm := all[i].SubmissionTime; tm.Before(lo) || !tm.Before(hi) {
				t.Errorf("ExpectedIDsBetween returned %s at %s outside [%s, %s)", id, tm, lo, hi)
			}
		}
	}
}

func TestStatusAndPreview(t *testing.T) {
	s := start(t, testConfig(2, 2, 400))
	form := s.FormIDs()[0]
	finished := s.walk(t, form, url.Values{}, 150)
	withPreview := s.walk(t, form, url.Values{"includePreview": {"true"}}, 150)
	explicit := s.walk(t, form, url.Values{"status": {"finished"}, "includePreview": {"false"}}, 150)
	progress := s.walk(t, form, url.Values{"status": {"in_progress"}}, 150)
	if len(finished) != 400 || !slices.Equal(ids(explicit), ids(finished)) {
		t.Fatalf("%d finished", len(finished))
	}
	if n := len(withPreview) - len(finished); n < 1 {
		t.Errorf("includePreview added %d submissions", n)
	}
	if len(progress) < 2 {
		t.Errorf("%d in-progress submissions", len(progress))
	}
	listed := map[string]bool{}
	for _, id := range ids(finished) {
		listed[id] = true
	}
	for _, sub := range withPreview {
		if !listed[sub.SubmissionID] && slices.Contains(s.ExpectedIDs(form), sub.SubmissionID) {
			t.Errorf("preview %s is among the expected ids", sub.SubmissionID)
		}
	}
	if !slices.IsSortedFunc(withPreview, func(a, b forms.Submission) int { return a.SubmissionTime.Compare(b.SubmissionTime) }) {
		t.Error("finished and preview submissions are not merged in time order")
	}
	for _, sub := range progress {
		if listed[sub.SubmissionID] {
			t.Errorf("in-progress %s also listed as finished", sub.SubmissionID)
		}
		last := sub.Questions[len(sub.Questions)-1]
		if string(last.Value) != "null" {
			t.Errorf("in-progress %s answered its last question: %s", sub.SubmissionID, last.Value)
		}
	}
	// Hidden rows are still readable by id.
	if status, _, _ := s.do(t, "GET", "/forms/"+form+"/submissions/"+progress[0].SubmissionID, nil); status != 200 {
		t.Errorf("GET of an in-progress submission: %d", status)
	}
}

func TestSearch(t *testing.T) {
	s := start(t, testConfig(4, 1, 300))
	form := s.FormIDs()[0]
	all := s.walk(t, form, url.Values{}, 150)
	// A company name from a free-text answer, in a different case.
	var term string
	for _, sub := range all {
		for _, a := range sub.Questions {
			var v string
			if a.Name == "Nom de l'entreprise (société)" && json.Unmarshal(a.Value, &v) == nil && v != "" {
				term = v
			}
		}
	}
	if term == "" {
		t.Fatal("no company answer to search for")
	}
	cases := []struct {
		search string
		asc    bool
	}{{term, true}, {strings.ToUpper(term), true}, {term, false}, {"Müller", true}, {`"would recommend"`, true}, {"no such text anywhere", true}}
	for _, tc := range cases {
		q := url.Values{"search": {tc.search}, "sort": {"desc"}}
		if tc.asc {
			q.Set("sort", "asc")
		}
		got := s.walk(t, form, q, 11)
		var want []string
		for _, sub := range all {
			for _, a := range sub.Questions {
				if strings.Contains(strings.ToLower(string(a.Value)), strings.ToLower(string(appendStringBody(nil, tc.search)))) {
					want = append(want, sub.SubmissionID)
					break
				}
			}
		}
		if !tc.asc {
			slices.Reverse(want)
		}
		if !slices.Equal(ids(got), want) {
			t.Errorf("search %q: %d results, want %d", tc.search, len(got), len(want))
		}
		if tc.search != "no such text anywhere" && len(want) == 0 {
			t.Errorf("search %q found nothing: the case proves nothing", tc.search)
		}
	}
	// Question names are not answers.
	if n := s.page(t, form, url.Values{"search": {"Shipping address"}}).TotalResponses; n != 0 {
		t.Errorf("search matched a question name in %d submissions", n)
	}
}

func TestEditLinkAndSingleSubmission(t *testing.T) {
	s := start(t, testConfig(6, 1, 30))
	form := s.FormIDs()[0]
	var plain, linked struct {
		Responses []json.RawMessage `json:"responses"`
	}
	s.getJSON(t, "/forms/"+form+"/submissions?limit=5", &plain)
	s.getJSON(t, "/forms/"+form+"/submissions?limit=5&includeEditLink=true", &linked)
	for i := range plain.Responses {
		var a, b forms.Submission
		_ = json.Unmarshal(plain.Responses[i], &a)
		_ = json.Unmarshal(linked.Responses[i], &b)
		if a.EditLink != "" || b.EditLink == "" || !strings.Contains(b.EditLink, a.SubmissionID) {
			t.Errorf("editLink without %q, with %q", a.EditLink, b.EditLink)
		}
		// The single endpoint renders the same bytes as the list.
		var one struct {
			Submission json.RawMessage `json:"submission"`
		}
		s.getJSON(t, "/forms/"+form+"/submissions/"+a.SubmissionID, &one)
		if !bytes.Equal(one.Submission, plain.Responses[i]) {
			t.Errorf("GET one %s differs from its list entry", a.SubmissionID)
		}
		s.getJSON(t, "/forms/"+form+"/submissions/"+a.SubmissionID+"?includeEditLink=true", &one)
		if !bytes.Equal(one.Submission, linked.Responses[i]) {
			t.Errorf("GET one %s with editLink differs from its list entry", a.SubmissionID)
		}
	}
	if status, _, _ := s.do(t, "GET", "/forms/"+form+"/submissions/"+s.ExpectedIDs(form)[0]+"?includeEditLink=perhaps", nil); status != 400 {
		t.Errorf("bad includeEditLink on one submission: %d", status)
	}
}

func TestCreateSubmissions(t *testing.T) {
	s := start(t, testConfig(8, 1, 50))
	form := s.FormIDs()[0]
	meta, _ := s.Form(form)
	path := "/forms/" + form + "/submissions"
	before := s.ExpectedIDs(form)

	bad := []struct {
		body   string
		status int
	}{
		{`{"submissions":[` + strings.TrimSuffix(strings.Repeat(`{},`, 11), ",") + `]}`, 400},
		{`{}`, 400},
		{`{"submissions":null}`, 400},
		{`not json`, 400},
		{`{"submissions":[{"questions":[{"id":"nope","value":1}]}]}`, 400},
		{`{"submissions":[{"submissionTime":"last week"}]}`, 400},
		{`{"submissions":[{"scheduling":[{"id":"nope","value":{}}]}]}`, 400},
		{`{"submissions":[{}],"pad":"` + strings.Repeat("x", maxBody) + `"}`, 413},
	}
	for _, tc := range bad {
		status, body, _ := s.do(t, "POST", path, tc.body)
		if status != tc.status {
			t.Errorf("%.60s: %d, want %d", tc.body, status, tc.status)
		}
		messageOf(t, body)
	}
	if got := s.ExpectedIDs(form); !slices.Equal(got, before) {
		t.Fatal("refused creates changed the data")
	}

	at := testStart.Add(36*time.Hour + 123*time.Millisecond)
	q0, q1 := meta.Questions[0], meta.Questions[21]
	req := map[string]any{"submissions": []any{
		map[string]any{
			"submissionTime": at.Format(forms.DateLayout),
			"questions":      []any{map[string]any{"id": q0.ID, "value": "imported, not the usual shape"}, map[string]any{"id": q1.ID, "value": 7}},
			"urlParameters":  []any{map[string]any{"id": "ref", "name": "ref", "value": "import"}},
			"scheduling":     []any{map[string]any{"id": meta.Scheduling[0].ID, "value": map[string]any{"fullName": "Zoë", "userId": 7}}},
			"payments":       []any{map[string]any{"id": meta.Payments[0].ID, "value": map[string]any{"totalAmount": 12.5, "currency": "EUR"}}},
		},
		map[string]any{}, // all defaults: now, no answers
	}}
	var created struct {
		Submissions []forms.Submission `json:"submissions"`
	}
	status, body, _ := s.do(t, "POST", path, req)
	if status != 200 || json.Unmarshal(body, &created) != nil || len(created.Submissions) != 2 {
		t.Fatalf("create: %d %s", status, body)
	}
	c0, c1 := created.Submissions[0], created.Submissions[1]
	if !c0.SubmissionTime.Equal(at) || !c1.SubmissionTime.Equal(testNow) {
		t.Errorf("times %s and %s, want %s and now %s", c0.SubmissionTime, c1.SubmissionTime, at, testNow)
	}
	if c0.LastUpdatedAt == nil || !c0.LastUpdatedAt.Equal(testNow) {
		t.Errorf("lastUpdatedAt of a back-dated import: %v, want now", c0.LastUpdatedAt)
	}
	if string(c0.Questions[0].Value) != `"imported, not the usual shape"` || string(c0.Questions[21].Value) != "7" || string(c0.Questions[1].Value) != "null" {
		t.Errorf("answers as created: %s %s %s", c0.Questions[0].Value, c0.Questions[21].Value, c0.Questions[1].Value)
	}
	if len(c0.URLParameters) != 1 || c0.URLParameters[0].Value != "import" || len(c0.Scheduling) != 1 || len(c0.Payments) != 1 ||
		!strings.Contains(string(c0.Payments[0].Value), `"totalAmount":12.5`) || c0.Payments[0].Name != "Deposit" {
		t.Errorf("created extras: %+v %+v %+v", c0.URLParameters, c0.Scheduling, c0.Payments)
	}
	// Stored: listed in its back-dated window, readable alone, counted.
	window := s.walk(t, form, url.Values{"afterDate": {at.Add(-time.Millisecond).Format(forms.DateLayout)}, "beforeDate": {at.Add(time.Millisecond).Format(forms.DateLayout)}}, 10)
	if !slices.Contains(ids(window), c0.SubmissionID) {
		t.Errorf("back-dated import not in its window %v", ids(window))
	}
	var one struct{ Submission forms.Submission }
	s.getJSON(t, path+"/"+c0.SubmissionID, &one)
	if !equalJSON(t, one.Submission, c0) {
		t.Error("the stored import reads back differently")
	}
	if n := len(s.ExpectedIDs(form)); n != len(before)+2 {
		t.Errorf("%d expected ids after creating 2 into %d", n, len(before))
	}
	if s.Stats().Created != 2 {
		t.Errorf("Created = %d", s.Stats().Created)
	}
	// Exactly 10 is fine.
	status, _, _ = s.do(t, "POST", path, `{"submissions":[`+strings.TrimSuffix(strings.Repeat(`{},`, 10), ",")+`]}`)
	if status != 200 {
		t.Errorf("10 submissions: %d", status)
	}
}

func TestDelete(t *testing.T) {
	s := start(t, testConfig(9, 1, 40))
	form := s.FormIDs()[0]
	before := s.ExpectedIDs(form)
	victim := before[17]
	path := "/forms/" + form + "/submissions/" + victim
	if status, body, _ := s.do(t, "DELETE", path, nil); status != 200 || string(body) != "{}" {
		t.Fatalf("delete: %d %s", status, body)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if status, body, _ := s.do(t, m, path, nil); status != 404 {
			t.Errorf("%s after delete: %d", m, status)
		} else {
			messageOf(t, body)
		}
	}
	after := s.ExpectedIDs(form)
	if want := slices.Delete(slices.Clone(before), 17, 18); !slices.Equal(after, want) {
		t.Error("ExpectedIDs after delete is not the list without the victim")
	}
	if got := ids(s.walk(t, form, url.Values{}, 9)); !slices.Equal(got, after) {
		t.Error("paging after delete differs from ExpectedIDs")
	}
	if err := s.Delete(form, victim); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete twice: %v", err)
	}
	if err := s.Delete("nope", victim); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete in an unknown form: %v", err)
	}
	if err := s.Delete(form, after[0]); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Deleted != 2 {
		t.Errorf("Deleted = %d", st.Deleted)
	}
}

// Explicit metadata changes keep history: older rows answer null to a new
// question and keep the type they were answered with.
func TestMetadataChangesAndInsert(t *testing.T) {
	s := start(t, testConfig(21, 2, 100))
	form := s.FormIDs()[1]
	meta, _ := s.Form(form)
	var text, number forms.Field
	for _, q := range meta.Questions {
		if q.Type == "ShortAnswer" && text.ID == "" {
			text = q
		}
		if q.Type == "NumberInput" && number.ID == "" {
			number = q
		}
	}
	old := s.ExpectedIDs(form)[0]
	if err := s.RenameQuestion(form, text.ID, "A completely new title"); err != nil {
		t.Fatal(err)
	}
	if err := s.AddQuestion(form, forms.Field{ID: "qFuture", Name: "Hologram", Type: "FancyNewWidget"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ChangeQuestionType(form, number.ID, "ShortAnswer"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		s.RenameQuestion(form, "nope", "x"), s.ChangeQuestionType(form, "nope", "ShortAnswer"),
		s.AddQuestion(form, forms.Field{ID: "qFuture", Name: "again", Type: "ShortAnswer"}),
		s.AddQuestion(form, forms.Field{Name: "no id", Type: "ShortAnswer"}), s.AddQuestion("nope", forms.Field{ID: "x", Type: "ShortAnswer"}),
		s.ChangeQuestionType(form, number.ID, ""),
	} {
		if err == nil {
			t.Error("an invalid metadata change was accepted")
		}
	}
	newIDs, err := s.Insert(form, testEnd.Add(time.Hour), testEnd.Add(time.Hour))
	if err != nil || len(newIDs) != 2 || newIDs[0] == newIDs[1] {
		t.Fatalf("Insert: %v %v", newIDs, err)
	}
	if _, err := s.Insert("nope", testEnd); !errors.Is(err, ErrNotFound) {
		t.Errorf("Insert into an unknown form: %v", err)
	}
	meta, _ = s.Form(form)
	var oldSub, newSub struct{ Submission forms.Submission }
	s.getJSON(t, "/forms/"+form+"/submissions/"+old, &oldSub)
	s.getJSON(t, "/forms/"+form+"/submissions/"+newIDs[0], &newSub)
	answer := func(sub forms.Submission, id string) forms.Answer {
		i := slices.IndexFunc(sub.Questions, func(a forms.Answer) bool { return a.ID == id })
		if i < 0 {
			t.Fatalf("submission %s has no answer to %s", sub.SubmissionID, id)
		}
		return sub.Questions[i]
	}
	if a := answer(oldSub.Submission, text.ID); a.Name != "A completely new title" {
		t.Errorf("renamed question shows %q in an old submission", a.Name)
	}
	if a := answer(oldSub.Submission, "qFuture"); string(a.Value) != "null" || a.Type != "FancyNewWidget" {
		t.Errorf("old submission answers the new question: %+v", a)
	}
	if a := answer(newSub.Submission, "qFuture"); string(a.Value) == "null" {
		t.Errorf("new submission leaves the new question empty: %+v", a)
	}
	if a := answer(oldSub.Submission, number.ID); a.Type != "NumberInput" {
		t.Errorf("old submission's answer changed type to %s", a.Type)
	}
	if a := answer(newSub.Submission, number.ID); a.Type != "ShortAnswer" {
		t.Errorf("new submission's answer has type %s", a.Type)
	}
	i := slices.IndexFunc(meta.Questions, func(q forms.Field) bool { return q.ID == number.ID })
	if meta.Questions[i].Type != "ShortAnswer" || meta.Questions[len(meta.Questions)-1].ID != "qFuture" {
		t.Errorf("metadata after changes: %+v", meta.Questions)
	}
	// Form returns a copy.
	meta.Questions[0].Name = "mutated"
	if again, _ := s.Form(form); again.Questions[0].Name == "mutated" {
		t.Error("Form returned shared state")
	}
}

func TestWebhooks(t *testing.T) {
	type delivery struct {
		path string
		body forms.WebhookDelivery
		raw  map[string]json.RawMessage
	}
	got := make(chan delivery, 100)
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d delivery
		d.path = r.URL.RequestURI()
		raw, _ := readAll(r)
		if json.Unmarshal(raw, &d.body) != nil || json.Unmarshal(raw, &d.raw) != nil {
			w.WriteHeader(400)
		}
		got <- d
	})
	hook := httptestServer(t, receiver)

	s := start(t, testConfig(12, 2, 20))
	form, other := s.FormIDs()[0], s.FormIDs()[1]
	create := func(formID, u string) (int, int64) {
		status, body, _ := s.do(t, "POST", "/webhook/create", map[string]string{"formId": formID, "url": u})
		var out struct{ ID json.Number }
		if status == 200 {
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatal(err)
			}
			if _, err := out.ID.Int64(); err != nil || strings.Contains(string(body), `"id":"`) {
				t.Fatalf("webhook id is not a number: %s", body)
			}
		}
		n, _ := out.ID.Int64()
		return status, n
	}
	for _, tc := range []struct {
		form, url string
		status    int
	}{{"nope", hook + "/x", 404}, {form, "", 400}, {"", hook, 400}, {form, "ftp://x/y", 400}, {form, "/relative", 400}} {
		if status, _ := create(tc.form, tc.url); status != tc.status {
			t.Errorf("create webhook %q %q: %d, want %d", tc.form, tc.url, status, tc.status)
		}
	}
	_, id1 := create(form, hook+"/in?secret=s3")
	_, id2 := create(other, hook+"/other")
	if id1 <= 0 || id2 <= 0 || id1 == id2 {
		t.Fatalf("webhook ids %d %d", id1, id2)
	}

	status, body, _ := s.do(t, "POST", "/forms/"+form+"/submissions", `{"submissions":[{},{}]}`)
	var created struct{ Submissions []forms.Submission }
	if status != 200 || json.Unmarshal(body, &created) != nil {
		t.Fatalf("create: %d %s", status, body)
	}
	inserted, _ := s.Insert(form, testNow)
	want := append(ids(created.Submissions), inserted...)
	var delivered []string
	for range want {
		select {
		case d := <-got:
			if d.path != "/in?secret=s3" || d.body.FormID != form || d.body.FormName == "" || d.raw["submission"] == nil {
				t.Errorf("delivery %s: %+v", d.path, d.raw)
			}
			delivered = append(delivered, d.body.Submission.SubmissionID)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d deliveries arrived", len(delivered), len(want))
		}
	}
	slices.Sort(delivered)
	slices.Sort(want)
	if !slices.Equal(delivered, want) {
		t.Errorf("delivered %v, created %v", delivered, want)
	}
	// The receiver hands a delivery over before it answers: let the last
	// answers reach the simulator before Close cancels deliveries in flight.
	for deadline := time.Now().Add(10 * time.Second); s.Stats().WebhooksDelivered < int64(len(want)) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}

	// Delete by string and by number; unknown and malformed ids.
	for _, tc := range []struct {
		body   string
		status int
	}{{`{"webhookId":"` + jsonInt(id1) + `"}`, 200}, {`{"webhookId":` + jsonInt(id2) + `}`, 200},
		{`{"webhookId":` + jsonInt(id2) + `}`, 404}, {`{"webhookId":"abc"}`, 400}, {`{}`, 400}, {`{"webhookId":1.5}`, 400}} {
		if status, body, _ := s.do(t, "POST", "/webhook/delete", tc.body); status != tc.status || (status == 200 && string(body) != "{}") {
			t.Errorf("delete webhook %s: %d %s, want %d", tc.body, status, body, tc.status)
		}
	}
	// No webhook left: nothing more is delivered.
	if _, err := s.Insert(form, testNow); err != nil {
		t.Fatal(err)
	}
	s.Close() // waits for deliveries in flight
	select {
	case d := <-got:
		t.Errorf("delivery after the webhook was deleted: %+v", d.raw)
	default:
	}
	if st := s.Stats(); st.WebhooksDelivered != int64(len(want)) || st.WebhookFailures != 0 {
		t.Errorf("stats: %d delivered, %d failed", st.WebhooksDelivered, st.WebhookFailures)
	}
}

// A receiver that never answers does not hold up the API, and Close ends
// the delivery.
func TestWebhookDeliveryStopsOnClose(t *testing.T) {
	entered := make(chan struct{}, 1)
	hook := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Reading the body lets the server notice the client hanging up
		// (net/http starts its background read at the body's end).
		_, _ = io.Copy(io.Discard, r.Body)
		entered <- struct{}{}
		<-r.Context().Done()
	}))
	cfg := testConfig(1, 1, 5)
	cfg.WebhookTimeout = time.Hour
	s := start(t, cfg)
	form := s.FormIDs()[0]
	if status, _, _ := s.do(t, "POST", "/webhook/create", map[string]string{"formId": form, "url": hook}); status != 200 {
		t.Fatal(status)
	}
	if status, _, _ := s.do(t, "POST", "/forms/"+form+"/submissions", `{"submissions":[{}]}`); status != 200 {
		t.Fatal(status)
	}
	<-entered
	s.Close()
	if st := s.Stats(); st.WebhookFailures != 1 || st.WebhooksDelivered != 0 {
		t.Errorf("after Close: %d failed, %d delivered", st.WebhookFailures, st.WebhooksDelivered)
	}
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestRateLimit(t *testing.T) {
	cfg := testConfig(1, 1, 5)
	cfg.RateLimit, cfg.RateBurst = 0.001, 3 // three tokens, then none for the test's life
	s := start(t, cfg)
	var statuses []int
	for range 7 {
		status, body, h := s.do(t, "GET", "/forms", nil)
		statuses = append(statuses, status)
		if status == 429 {
			if msg := messageOf(t, body); msg != "Rate limit exceeded" {
				t.Errorf("429 message %q", msg)
			}
			if h.Get("Retry-After") != "" {
				t.Error("Retry-After without the knob")
			}
		}
	}
	if want := []int{200, 200, 200, 429, 429, 429, 429}; !slices.Equal(statuses, want) {
		t.Errorf("statuses %v, want %v", statuses, want)
	}
	// Bad keys do not spend the key's tokens, and are still refused first.
	if status, _, _ := s.doKey(t, "GET", "/forms", nil, "Bearer nope"); status != 401 {
		t.Errorf("bad key under the limit: %d", status)
	}
	s.SetFaults(Faults{RetryAfter: 1500 * time.Millisecond})
	if _, _, h := s.do(t, "GET", "/forms", nil); h.Get("Retry-After") != "2" {
		t.Errorf("Retry-After %q, want 2", h.Get("Retry-After"))
	}
	st := s.Stats()
	if st.RateLimited != 5 || st.ByStatus[429] != 5 || st.InjectedErrors != 0 {
		t.Errorf("stats: %d limited, %d 429s, %d injected", st.RateLimited, st.ByStatus[429], st.InjectedErrors)
	}
}
