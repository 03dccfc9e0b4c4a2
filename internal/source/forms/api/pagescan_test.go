package forms

import (
	"encoding/json"
	"reflect"
	"testing"
)

// checkScan holds scanPage to encoding/json on body: where it takes a page,
// the page must be the reference decoder's, converted or refused alike.
func checkScan(t *testing.T, body []byte) (took bool) {
	t.Helper()
	if !validUTF8JSON(body) {
		return false
	}
	var responses []wireSubmission
	w := wirePage{Responses: &responses}
	if !scanPage(body, &w) {
		return false
	}
	page, err := w.page(responses)
	ref, refErr := decodeSubmissionPage(body, json.Unmarshal)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("scanPage and encoding/json disagree on %q: %v, %v", body, err, refErr)
	}
	if err == nil && !reflect.DeepEqual(page, ref) {
		t.Fatalf("scanPage and encoding/json disagree on %q:\nscanPage      %+v\nencoding/json %+v", body, page, ref)
	}
	return true
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
		{"nulls everywhere", `{"responses":[null,{"submissionId":null,"quiz":null,"login":null,"questions":[null],"documents":null,"calculations":[]}],"totalResponses":null,"pageCount":null}`, true},
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkScan(t, []byte(tt.body)); got != tt.took {
				t.Errorf("scanPage took it: %v, want %v", got, tt.took)
			}
		})
	}
}

func FuzzScanPage(f *testing.F) {
	for _, s := range pageSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkScan(t, body) })
}

// TestScannedValuesOwnTheirBytes: a kept submission must not keep (or see
// changes to) the page it came from.
func TestScannedValuesOwnTheirBytes(t *testing.T) {
	body := []byte(`{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","value":{"k":"v"}}],"scheduling":[{"id":"s","value":"x"}],"payments":[{"id":"p","value":1}]}],"totalResponses":1}`)
	var responses []wireSubmission
	w := wirePage{Responses: &responses}
	if !scanPage(body, &w) {
		t.Fatal("scanPage declined the page")
	}
	page, err := w.page(responses)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = ' '
	}
	s := page.Responses[0]
	for _, c := range []struct{ got, want string }{
		{string(s.Questions[0].Value), `{"k":"v"}`},
		{string(s.Scheduling[0].Value), `"x"`},
		{string(s.Payments[0].Value), `1`},
	} {
		if c.got != c.want {
			t.Errorf("value %q after the page was overwritten, want %q", c.got, c.want)
		}
	}
}
