package forms

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
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
		// Where a fast decoder could part from encoding/json: escapes, lone
		// surrogates, duplicate and differently cased keys, big numbers.
		`{"responses":[{"submissionId":"\ud800\u00e9\u0000","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","value":"\udfff x"}]}],"totalResponses":1}`,
		`{"responses":[{"submissionId":"a","SUBMISSIONID":"b","submissionTime":"2024-01-01T10:00:00Z","submissionTime":"2024-01-02T10:00:00Z"}],"TotalResponses":1,"totalResponses":2}`,
		`{"responses":[{"submissionId":"a","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","value":12345678901234567890123}]}],"totalResponses":1,"pageCount":9223372036854775807}`,
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
		// The fast decoder must agree with encoding/json, the reference,
		// wherever keys are spelt as the service spells them.
		if ref, refErr := decodePageWith(body, json.Unmarshal); !hasInexactKeys(body) {
			if (err == nil) != (refErr == nil) {
				t.Fatalf("decoders disagree on %q: fast path %v, encoding/json %v", body, err, refErr)
			}
			if err == nil {
				checkValuesChecked(t, page)
				if !reflect.DeepEqual(page, ref) {
					t.Fatalf("decoders disagree on %q:\nfast path     %+v\nencoding/json %+v", body, page, ref)
				}
			}
		}
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

// hasInexactKeys reports whether a valid JSON text has a key that matches a
// field of the wire types only under case folding ("SubmissionID"): the
// service spells every key exactly, and there encoding/json (which folds,
// and takes the last of two candidates) and goccy/go-json (which prefers the
// exact spelling) differ by design.
func hasInexactKeys(body []byte) bool {
	names := map[string]bool{}
	collectJSONNames(reflect.TypeOf(wireSubmission{}), names, map[reflect.Type]bool{})
	dec := json.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		k, ok := tok.(string)
		if !ok || names[k] {
			continue
		}
		for n := range names {
			if strings.EqualFold(n, k) {
				return true
			}
		}
	}
}

// collectJSONNames adds the JSON names of t's fields, nested types included.
func collectJSONNames(t reflect.Type, names map[string]bool, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" && !f.Anonymous {
			name = f.Name
		}
		if name != "" && name != "-" {
			names[name] = true
		}
		collectJSONNames(f.Type, names, seen)
	}
	names["responses"], names["totalResponses"], names["pageCount"] = true, true, true
}
