package forms

import (
	"encoding/json"
	"testing"
	"time"
)

// pageSeeds are realistic pages, truncated ones and wrong types.
func pageSeeds() []string {
	seeds := []string{
		realisticPage,
		minimalPage,
		`{"responses":null,"totalResponses":0,"pageCount":0}`,
		`{"responses":[{"submissionId":"a","submissionTime":"2024-01-01 10:00:00","quiz":{}}],"totalResponses":1,"pageCount":1}`,
		`{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00+0200","calculations":[{"value":1e400}]}],"totalResponses":1}`,
		`{"responses":[{"submissionId":"a","submissionTime":123}],"totalResponses":1}`,
		`{"responses":[{"submissionId":1}],"totalResponses":1}`,
		`{"responses":"x","totalResponses":1}`,
		`{"responses":[],"totalResponses":1e3}`,
		`{"responses":[],"totalResponses":-1}`,
		`{"responses":[{"submissionId":"a","submissionTime":"9999-12-31T23:59:59-23:59"}],"totalResponses":1}`,
		`{"responses":[{"submissionId":"a","submissionTime":"\u0000"}],"totalResponses":1}`,
		`[]`, `null`, `""`, `{}`, ``, `{"message":"rate limited"}`,
	}
	for _, cut := range []int{1, 17, 100, len(realisticPage) / 2, len(realisticPage) - 1} {
		seeds = append(seeds, realisticPage[:cut])
	}
	return seeds
}

// checkSubmission holds for every submission a decoder accepts: keyed, in
// UTC, and renderable again (years within RFC 3339).
func checkSubmission(t *testing.T, s *Submission, strict bool) {
	t.Helper()
	if strict && (s.SubmissionID == "" || s.SubmissionTime.IsZero()) {
		t.Fatalf("accepted a submission without id or time: %+v", s)
	}
	for _, tm := range []*time.Time{&s.SubmissionTime, s.LastUpdatedAt, s.StartedAt} {
		if tm != nil && !tm.IsZero() && tm.Location() != time.UTC {
			t.Fatalf("time %v not in UTC", tm)
		}
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("accepted submission does not marshal: %v", err)
	}
}

func FuzzDecodeSubmissionPage(f *testing.F) {
	for _, s := range pageSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		page, err := DecodeSubmissionPage(body)
		if err != nil {
			if page != nil {
				t.Fatal("page returned with an error")
			}
			return
		}
		if page.TotalResponses < 0 || page.PageCount < 0 {
			t.Fatalf("negative counts: %+v", page)
		}
		for i := range page.Responses {
			checkSubmission(t, &page.Responses[i], true)
		}
	})
}

func FuzzDecodeWebhook(f *testing.F) {
	sub := `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","value":"hi"}]}`
	for _, s := range []string{
		sub,
		`{"formId":"f1","formName":"F","submission":` + sub + `}`,
		`{"formId":1,"submission":` + sub + `}`,
		`{"formId":"f1","submission":null}`,
		`{"submission":"x"}`,
		`{"submissionId":null}`,
		`{"formId":"f1","formName":"F","submission":` + sub[:30],
		``, `[]`, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := DecodeWebhook(body)
		if err != nil {
			if d != nil {
				t.Fatal("delivery returned with an error")
			}
			return
		}
		checkSubmission(t, &d.Submission, true)
	})
}
