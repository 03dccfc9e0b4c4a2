package forms

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkScan holds scanPage to encoding/json on body, valid or not: where
// it takes a page, the page must be valid UTF-8 JSON and the reference
// decoder's.
func checkScan(t *testing.T, body []byte) (took bool) {
	t.Helper()
	page, ok := scanPage(body, nil)
	if !ok {
		return false
	}
	if !validUTF8JSON(body) {
		t.Fatalf("scanPage took %q, which is not valid UTF-8 JSON", body)
	}
	ref, refErr := decodePageWith(body, json.Unmarshal)
	if refErr != nil {
		t.Fatalf("scanPage took %q, which encoding/json refuses: %v", body, refErr)
	}
	checkValuesChecked(t, page)
	if !reflect.DeepEqual(page, ref) {
		t.Fatalf("scanPage and encoding/json disagree on %q:\nscanPage      %+v\nencoding/json %+v", body, page, ref)
	}
	// Into buffers that held another page: the same page, nothing of the
	// other left in it.
	var bufs PageBuffers
	if _, ok := scanPage([]byte(realisticPage), &bufs); !ok {
		t.Fatal("scanPage declined the realistic page")
	}
	again, ok := scanPage(body, &bufs)
	if ok {
		checkValuesChecked(t, again)
	}
	if !ok || !reflect.DeepEqual(again, ref) {
		t.Fatalf("scanPage into reused buffers took %v, and disagrees on %q:\nreused        %+v\nencoding/json %+v", ok, body, again, ref)
	}
	return true
}

// checkValuesChecked fails unless every submission that says its values
// are checked has only valid, compact UTF-8 JSON values in the fields the
// flag covers; it then clears the flag, which encoding/json never sets.
func checkValuesChecked(t *testing.T, page *SubmissionPage) {
	t.Helper()
	for i := range page.Responses {
		sub := &page.Responses[i]
		if !sub.ValuesChecked {
			continue
		}
		var values []json.RawMessage
		for _, a := range sub.Questions {
			values = append(values, a.Value)
		}
		for _, e := range sub.Scheduling {
			values = append(values, e.Value)
		}
		for _, e := range sub.Payments {
			values = append(values, e.Value)
		}
		for _, v := range values {
			if v == nil {
				continue // a null entry: no value at all
			}
			if valid, compact := ValidJSON(v); !valid || !compact || !validUTF8JSON(v) {
				t.Fatalf("submission %q says its values are checked, but %q is not valid, compact UTF-8 JSON", sub.SubmissionID, v)
			}
		}
		sub.ValuesChecked = false
	}
}

// TestScanPage: the pages the service sends take the scanner, and the
// shapes it leaves to the general decoders are left.
func TestScanPage(t *testing.T) {
	sub := `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","name":"Q","type":"ShortAnswer","value":"hi"}]}`
	tests := []struct {
		name string
		body string
		took bool
	}{
		{"realistic", realisticPage, true},
		{"minimal", minimalPage, true},
		{"null responses", `{"responses":null,"totalResponses":0}`, true},
		{"escapes", `{"responses":[{"submissionId":"a\u00e9\ud83d\ude00","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q\n","name":"\ud800x","value":"\"v\""}]}],"totalResponses":1}`, true},
		{"nulls everywhere", `{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00Z","lastUpdatedAt":null,"startedAt":"","quiz":null,"login":null,"questions":[null],"documents":null,"calculations":[]}],"totalResponses":1,"pageCount":null}`, true},
		{"null total", `{"responses":[],"totalResponses":null}`, false},
		{"no total", `{"responses":[]}`, false},
		{"no responses", `{"totalResponses":0}`, false},
		{"negative total", `{"responses":[],"totalResponses":-1}`, false},
		{"null submission", `{"responses":[null],"totalResponses":1}`, false},
		{"submission without an id", `{"responses":[{"submissionId":null,"submissionTime":"2024-01-01T10:00:00Z"}],"totalResponses":1}`, false},
		{"submission without a time", `{"responses":[{"submissionId":"a"}],"totalResponses":1}`, false},
		{"bad time", `{"responses":[{"submissionId":"a","submissionTime":"yesterday"}],"totalResponses":1}`, false},
		{"unknown keys", `{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00Z","approvals":[{"x":1}],"questions":[{"id":"q","value":1,"extra":{}}]}],"totalResponses":1,"next":"x"}`, true},
		{"repeated key", `{"responses":[` + sub + `],"totalResponses":1,"totalResponses":2}`, false},
		{"folded key", `{"responses":[{"SubmissionId":"a"}],"totalResponses":1}`, false},
		{"escaped key", `{"responses":[],"total\u0052esponses":1}`, false},
		{"total not an int", `{"responses":[],"totalResponses":1e3}`, false},
		{"id a number", `{"responses":[{"submissionId":1}],"totalResponses":1}`, false},
		{"score out of range", `{"responses":[{"submissionId":"a","quiz":{"score":1e400}}],"totalResponses":1}`, false},
		{"responses an object", `{"responses":{},"totalResponses":1}`, false},
		{"not an object", `[]`, false},
	}
	// A submission's shared strings are matched in place against the last
	// submission's: each pair is a string and the one at its position in
	// the next submission.
	for _, p := range [][2]string{
		{`"Q"`, `"Q"`}, {`"ab"`, `"abc"`}, {`"ab"`, `"a"`}, {`"a"`, `"a\n"`}, {`"ab"`, `"ab\"c"`},
		{`"a\"b"`, `"a\"b"`}, {`"a\u0062"`, `"ab"`}, {`"ab"`, `"a\u0062"`}, {`"é"`, `"é"`}, {`"Q"`, `null`}, {`null`, `"Q"`},
	} {
		tests = append(tests, struct {
			name string
			body string
			took bool
		}{"shared " + p[0] + " then " + p[1], pair(p[0], p[1]), true})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkScan(t, []byte(tt.body)); got != tt.took {
				t.Errorf("scanPage took it: %v, want %v", got, tt.took)
			}
		})
	}
}

// TestScanPageRefusesBrokenPages: the scanner validates as it reads, so a
// broken page is declined (to the general decoders, which say why), never
// taken and never a panic.
// pair is a page of two submissions whose one answer's name is first,
// then second (raw JSON).
func pair(first, second string) string {
	sub := func(id, name string) string {
		return `{"submissionId":"` + id + `","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","name":` + name + `,"type":"ShortAnswer","value":"hi"}]}`
	}
	return `{"responses":[` + sub("s1", first) + `,` + sub("s2", second) + `],"totalResponses":2}`
}

func TestScanPageRefusesBrokenPages(t *testing.T) {
	sub := `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","name":"Q","type":"ShortAnswer","value":"hi"}]}`
	for _, body := range []string{
		`{"responses":[` + sub + `,],"totalResponses":1}`,
		`{"responses":[` + sub + `],"totalResponses":1,}`,
		`{"responses":[` + sub + `] "totalResponses":1}`,
		`{"responses" [` + sub + `],"totalResponses":1}`,
		`{"responses":[` + sub + `],"totalResponses":1}x`,
		`{"responses":[` + sub + `],"totalResponses":01}`,
		`{"responses":[` + sub + `],"totalResponses":1.}`,
		`{"responses":[` + sub + `],"totalResponses":nul}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, "\"h\x80i\"", 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, "\"h\x01i\"", 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, `"h\qi"`, 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, `{"a":1,}`, 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, `[1 2]`, 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"hi"`, `tru`, 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"q"`, "\"q\xff\"", 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"approvals"`, `"x"`, 1) + `],"totalResponses":1,"next":[}`,
		// A key expected next, but not closed where it should be.
		`{"responses0:[` + sub + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"name":`, `"name0:`, 1) + `],"totalResponses":1}`,
		`{"responses":[` + strings.Replace(sub, `"name":`, `"name`, 1) + `],"totalResponses":1}`,
		// The last submission's string had an escaped quote: its text is
		// not its literal.
		pair(`"a\""`, `"a""`),
	} {
		if checkScan(t, []byte(body)) {
			t.Errorf("scanPage took the broken page %q", body)
		}
	}
	// Every cut of a whole page is broken.
	for n := range len(realisticPage) {
		if checkScan(t, []byte(realisticPage[:n])) {
			t.Fatalf("scanPage took the page cut at %d bytes", n)
		}
	}
}

func FuzzScanPage(f *testing.F) {
	for _, s := range pageSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkScan(t, body) })
}

// TestClonedSubmissionOwnsItsBytes: a decoded page's submissions share its
// bytes (the decoder copies nothing it need not); a clone, what a caller
// keeps beyond the page, neither keeps nor sees them.
func TestClonedSubmissionOwnsItsBytes(t *testing.T) {
	body := []byte(`{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00Z","lastUpdatedAt":"2024-01-02T10:00:00Z","questions":[{"id":"q","value":{"k":"v"}}],"scheduling":[{"id":"s","value":"x"}],"payments":[{"id":"p","value":1}],"calculations":[{"id":"c","value":"2"}],"documents":[{"id":"d","name":"n","url":"u"}]}],"totalResponses":1}`)
	page, ok := scanPage(body, nil)
	if !ok {
		t.Fatal("scanPage declined the page")
	}
	clone := page.Responses[0].Clone()
	if !reflect.DeepEqual(clone, page.Responses[0]) {
		t.Fatalf("clone differs:\n%+v\n%+v", clone, page.Responses[0])
	}
	for i := range body {
		body[i] = ' '
	}
	page.Responses[0].Calculations[0].Value = "changed"
	*page.Responses[0].LastUpdatedAt = time.Time{}
	page.Responses[0].Documents[0].ID = "changed"
	for _, c := range []struct{ got, want string }{
		{string(clone.Questions[0].Value), `{"k":"v"}`},
		{string(clone.Scheduling[0].Value), `"x"`},
		{string(clone.Payments[0].Value), `1`},
		{clone.Calculations[0].Value, "2"},
		{clone.LastUpdatedAt.Format(time.RFC3339), "2024-01-02T10:00:00Z"},
		{clone.Documents[0].ID, "d"},
	} {
		if c.got != c.want {
			t.Errorf("cloned value %q after the page was overwritten, want %q", c.got, c.want)
		}
	}
	if got := string(page.Responses[0].Questions[0].Value); got == `{"k":"v"}` {
		t.Errorf("the page's own submission kept %q: it was meant to share the page's bytes (a copy per submission is what this decoder avoids)", got)
	}
}
