package forms

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseTimestamp(t *testing.T) {
	want := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC)
	wantMS := want.Add(123 * time.Millisecond)
	tests := []struct {
		raw     string
		want    time.Time
		present bool
		err     string
	}{
		{`"2024-01-01T10:00:00Z"`, want, true, ""},
		{`"2024-01-01T10:00:00.123Z"`, wantMS, true, ""},
		{`"2024-01-01T12:00:00.123+02:00"`, wantMS, true, ""},
		{`"2024-01-01T12:00:00+0200"`, want, true, ""},
		{`"2024-01-01T12:00:00+02"`, want, true, ""},
		{`"2024-01-01 10:00:00Z"`, want, true, ""},
		{`"2024-01-01 12:00:00.123+02:00"`, wantMS, true, ""},
		{`"2024-01-01 10:00:00"`, want, true, ""},       // no zone: UTC
		{`"2024-01-01T10:00:00.123"`, wantMS, true, ""}, // no zone: UTC
		{`null`, time.Time{}, false, ""},
		{`""`, time.Time{}, false, ""},
		{``, time.Time{}, false, ""},
		{`"yesterday"`, time.Time{}, false, `unrecognised timestamp "yesterday"`},
		{`"2024-13-01T10:00:00Z"`, time.Time{}, false, "unrecognised timestamp"},
		{`"2024-01-01"`, time.Time{}, false, "unrecognised timestamp"},
		{`1704103200`, time.Time{}, false, "want a timestamp string"},
		{`{"t":1}`, time.Time{}, false, "want a timestamp string"},
		{`"0000-01-01T00:30:00+01:00"`, time.Time{}, false, "out of range"},
		{`"0000-12-31T23:00:00Z"`, time.Time{}, false, "out of range"},
		{`"9999-12-31T23:30:00-01:00"`, time.Time{}, false, "out of range"},
		{`"0001-01-01T00:00:00Z"`, time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), true, ""},
		{`"9999-12-31T23:59:59.999999999Z"`, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), true, ""},
		{`"2024-02-30T10:00:00Z"`, time.Time{}, false, "unrecognised timestamp"},
		{`"2024-01-01T10:00:00Z`, time.Time{}, false, "unexpected end"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got, present, err := parseTimestamp(json.RawMessage(tt.raw))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !got.Equal(tt.want) || present != tt.present || got.Location() != time.UTC {
				t.Errorf("got %v (%v, present %v), want %v", got, got.Location(), present, tt.want)
			}
		})
	}
}

// realisticPage has the quirks the field notes describe: quiz {}, null
// arrays, unknown keys, empty answers as "" and null, calculation values as
// strings (and one number), documents and startedAt.
const realisticPage = `{
  "responses": [
    {
      "submissionId": "abc-1",
      "submissionTime": "2024-02-01T10:00:00.000Z",
      "lastUpdatedAt": "2024-02-01T10:05:00.000Z",
      "startedAt": "2024-02-01T09:58:00.000Z",
      "questions": [
        {"id": "q1", "name": "Name", "type": "ShortAnswer", "value": "Ada"},
        {"id": "q2", "name": "Age", "type": "NumberInput", "value": 36},
        {"id": "q3", "name": "Where", "type": "Address", "value": {"address": "1 Main", "city": "X", "state": "", "zipCode": "1", "country": "US"}},
        {"id": "q4", "name": "Tags", "type": "MultiSelect", "value": ["a", "b"]},
        {"id": "q5", "name": "Ok", "type": "Switch", "value": true},
        {"id": "q6", "name": "Empty", "type": "LongAnswer", "value": null},
        {"id": "q7", "name": "Blank", "type": "ShortAnswer", "value": ""},
        {"id": "q8", "name": "New", "type": "HologramInput", "value": {"x": [1, 2]}}
      ],
      "calculations": [
        {"id": "c1", "name": "Total", "type": "number", "value": "12.50"},
        {"id": "c2", "name": "Raw", "type": "number", "value": 3.25},
        {"id": "c3", "name": "None", "type": "text", "value": null}
      ],
      "urlParameters": [{"id": "u1", "name": "utm_source", "value": "news"}],
      "scheduling": [{"id": "s1", "name": "Call", "value": {"fullName": "Ada", "eventStartTime": "2024-02-03T10:00:00Z", "userId": 7}}],
      "payments": [{"id": "p1", "name": "Pay", "value": {"paymentId": "pay_1", "totalAmount": 1999, "currency": "usd", "status": "succeeded"}}],
      "quiz": {},
      "login": {"email": "ada@example.com"},
      "documents": [{"id": "d1", "name": "Receipt", "url": "https://d"}],
      "approvals": [{"whatever": true}],
      "editLink": "https://edit"
    },
    {
      "submissionId": "abc-2",
      "submissionTime": "2024-02-01 11:00:00",
      "lastUpdatedAt": null,
      "questions": null,
      "calculations": null,
      "urlParameters": null,
      "scheduling": null,
      "payments": null,
      "quiz": {"score": 3, "maxScore": 5},
      "login": null
    }
  ],
  "totalResponses": 2,
  "pageCount": 1,
  "someNewKey": {"nested": [1, 2, 3]}
}`

func TestDecodeSubmissionPageRealistic(t *testing.T) {
	page, err := DecodeSubmissionPage([]byte(realisticPage))
	if err != nil {
		t.Fatal(err)
	}
	if page.TotalResponses != 2 || page.PageCount != 1 || len(page.Responses) != 2 {
		t.Fatalf("page = %+v", page)
	}
	a, b := page.Responses[0], page.Responses[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"id", a.SubmissionID, "abc-1"},
		{"time", a.SubmissionTime, time.Date(2024, 2, 1, 10, 0, 0, 0, time.UTC)},
		{"lastUpdatedAt", *a.LastUpdatedAt, time.Date(2024, 2, 1, 10, 5, 0, 0, time.UTC)},
		{"startedAt", *a.StartedAt, time.Date(2024, 2, 1, 9, 58, 0, 0, time.UTC)},
		{"questions", len(a.Questions), 8},
		{"number value raw", string(a.Questions[1].Value), "36"},
		{"address value raw", string(a.Questions[2].Value), `{"address": "1 Main", "city": "X", "state": "", "zipCode": "1", "country": "US"}`},
		{"null value raw", string(a.Questions[5].Value), "null"},
		{"unknown type kept", a.Questions[7].Type, "HologramInput"},
		{"calc string", a.Calculations[0].Value, "12.50"},
		{"calc number as text", a.Calculations[1].Value, "3.25"},
		{"calc null", a.Calculations[2].Value, ""},
		{"url parameter", a.URLParameters[0].Value, "news"},
		{"scheduling raw", string(a.Scheduling[0].Value), `{"fullName": "Ada", "eventStartTime": "2024-02-03T10:00:00Z", "userId": 7}`},
		{"payment raw", strings.Contains(string(a.Payments[0].Value), `"totalAmount": 1999`), true},
		{"quiz {}", a.Quiz != nil && a.Quiz.Score == nil && a.Quiz.MaxScore == nil, true},
		{"login", a.Login.Email, "ada@example.com"},
		{"documents", a.Documents[0].URL, "https://d"},
		{"editLink", a.EditLink, "https://edit"},
		{"zone-less time as UTC", b.SubmissionTime, time.Date(2024, 2, 1, 11, 0, 0, 0, time.UTC)},
		{"null lastUpdatedAt", b.LastUpdatedAt == nil, true},
		{"null questions", b.Questions == nil, true},
		{"quiz score", *b.Quiz.Score, 3.0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestDecodeSubmissionPageRejects(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"empty", ``, "unexpected end of JSON input"},
		{"array", `[]`, "cannot unmarshal array"},
		{"no responses", `{"totalResponses":0}`, "responses is missing"},
		{"no total", `{"responses":null}`, "totalResponses is missing"},
		{"negative total", `{"responses":[],"totalResponses":-1}`, "negative totalResponses"},
		{"total as string", `{"responses":[],"totalResponses":"3"}`, "totalResponses"},
		{"responses object", `{"responses":{},"totalResponses":0}`, "cannot unmarshal object into Go struct field .responses"},
		{"no id", `{"responses":[{"submissionTime":"2024-01-01T00:00:00Z"}],"totalResponses":1}`, "responses[0]: submissionId is missing"},
		{"no time", `{"responses":[{"submissionId":"x"}],"totalResponses":1}`, `responses[0] (submission "x"): submissionTime is missing`},
		{"bad lastUpdatedAt", `{"responses":[{"submissionId":"x","submissionTime":"2024-01-01T00:00:00Z","lastUpdatedAt":"soon"}],"totalResponses":1}`,
			`responses[0] (submission "x"): lastUpdatedAt: unrecognised timestamp "soon"`},
		{"questions object", `{"responses":[{"submissionId":"x","submissionTime":"2024-01-01T00:00:00Z","questions":{}}],"totalResponses":1}`, "questions"},
		{"trailing garbage", minimalPage + `x`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := DecodeSubmissionPage([]byte(tt.body))
			if err == nil {
				t.Fatalf("decoded %+v", page)
			}
			mustContain(t, err.Error(), tt.want)
		})
	}
}

func TestDecodeSubmissionPageNullResponses(t *testing.T) {
	page, err := DecodeSubmissionPage([]byte(`{"responses":null,"totalResponses":0,"pageCount":0}`))
	if err != nil || len(page.Responses) != 0 {
		t.Fatalf("page %+v, err %v", page, err)
	}
}

func TestTransientDecodeError(t *testing.T) {
	tests := []struct {
		body      string
		transient bool
	}{
		{`{"responses":[`, true},
		{``, true},
		{`<html>`, true},
		{`{"responses":{},"totalResponses":0}`, false},
		{`{"responses":[{"submissionId":"x","submissionTime":"bad"}],"totalResponses":1}`, false},
		{`{"totalResponses":0}`, false},
	}
	for _, tt := range tests {
		_, err := DecodeSubmissionPage([]byte(tt.body))
		if err == nil {
			t.Fatalf("%s: no error", tt.body)
		}
		if got := transientDecodeError(err); got != tt.transient {
			t.Errorf("%s: transient = %v, want %v (%v)", tt.body, got, tt.transient, err)
		}
	}
}

func TestDecodeWebhook(t *testing.T) {
	sub := `{"submissionId":"s1","submissionTime":"2024-01-01T10:00:00Z","questions":[{"id":"q","name":"Q","type":"ShortAnswer","value":"hi"}]}`
	tests := []struct {
		name             string
		body             string
		formID, formName string
		err              string
	}{
		{"envelope", `{"formId":"f1","formName":"Signup","submission":` + sub + `}`, "f1", "Signup", ""},
		{"envelope, numeric form id", `{"formId":123,"formName":"N","submission":` + sub + `}`, "123", "N", ""},
		{"bare submission", sub, "", "", ""},
		{"envelope with a bad submission", `{"formId":"f1","submission":{"submissionId":"s1"}}`, "", "", "submission: submissionTime is missing"},
		{"bare without time", `{"submissionId":"s1"}`, "", "", "submissionTime is missing"},
		{"null submission", `{"formId":"f1","submission":null}`, "", "", "neither"},
		{"empty object", `{}`, "", "", "neither"},
		{"not json", `form=1`, "", "", "decode webhook delivery"},
		{"array", `[` + sub + `]`, "", "", "cannot unmarshal array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := DecodeWebhook([]byte(tt.body))
			if tt.err != "" {
				if err == nil {
					t.Fatalf("decoded %+v", d)
				}
				mustContain(t, err.Error(), tt.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.FormID != tt.formID || d.FormName != tt.formName || d.Submission.SubmissionID != "s1" ||
				string(d.Submission.Questions[0].Value) != `"hi"` {
				t.Errorf("delivery = %+v", d)
			}
		})
	}
}

func TestDecodeWebhookIDs(t *testing.T) {
	tests := []struct {
		body string
		want int64
		err  bool
	}{
		{`{"id":12345}`, 12345, false},
		{`{"id":"12345"}`, 12345, false},
		{`{"id":1.5}`, 0, true},
		{`{"id":null}`, 0, true},
		{`{}`, 0, true},
		{`{"id":"abc"}`, 0, true},
		{`{"id":99999999999999999999}`, 0, true},
	}
	for _, tt := range tests {
		got, err := decodeWebhookID([]byte(tt.body))
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("%s: %d, %v", tt.body, got, err)
		}
	}
}

func TestDecodeErrorWrapsCause(t *testing.T) {
	cause := errors.New("boom")
	err := error(&DecodeError{Endpoint: "GET /forms", Err: cause})
	if !errors.Is(err, cause) || !errors.Is(err, ErrDecode) || errors.Is(err, ErrUnavailable) {
		t.Errorf("errors.Is chain broken for %v", err)
	}
}

func BenchmarkDecodeSubmissionPage(b *testing.B) {
	// A full page of 150 realistic submissions.
	var one struct {
		Responses []json.RawMessage `json:"responses"`
	}
	if err := json.Unmarshal([]byte(realisticPage), &one); err != nil {
		b.Fatal(err)
	}
	parts := make([]string, 150)
	for i := range parts {
		parts[i] = string(one.Responses[0])
	}
	body := []byte(`{"responses":[` + strings.Join(parts, ",") + `],"totalResponses":150,"pageCount":1}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSubmissionPage(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestScalarText: a value documented as a string reads as encoding/json
// would decode it when it is a string (the fast path for plain text must
// agree with the slow one), and as its JSON text when it is not.
func TestScalarText(t *testing.T) {
	tests := []struct {
		raw, want string
	}{
		{`"utm-newsletter"`, "utm-newsletter"},
		{` "padded" `, "padded"},
		{`""`, ""},
		{`null`, ""},
		{``, ""},
		{`"caf\u00e9 \"quoted\"\n"`, "café \"quoted\"\n"},
		{`"café ☕"`, "café ☕"},
		{"\"bad \xff byte\"", "bad \uFFFD byte"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\ud83d"`, "\uFFFD"},
		{`12.50`, "12.50"},
		{`true`, "true"},
		{`{"a":1}`, `{"a":1}`},
	}
	for _, tc := range tests {
		if got := scalarText(json.RawMessage(tc.raw)); got != tc.want {
			t.Errorf("scalarText(%q) = %q, want %q", tc.raw, got, tc.want)
		}
		var viaJSON string
		if strings.HasPrefix(strings.TrimSpace(tc.raw), `"`) && json.Unmarshal([]byte(tc.raw), &viaJSON) == nil && viaJSON != tc.want {
			t.Errorf("the test's own want for %q is %q, encoding/json says %q", tc.raw, tc.want, viaJSON)
		}
	}
}
