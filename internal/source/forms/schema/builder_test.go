package schema

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

type fixture struct {
	Form        forms.Form         `json:"form"`
	Submissions []forms.Submission `json:"submissions"`
}

func loadFixture(t testing.TB) fixture {
	t.Helper()
	b, err := os.ReadFile("testdata/every_type.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	return fx
}

func file(url, name, typ, size any) map[string]any {
	return map[string]any{"url": url, "filename": name, "type": typ, "size": size}
}

// TestBuilderEveryType appends a full, an empty and an odd submission of a
// form with every documented question type and checks every column.
func TestBuilderEveryType(t *testing.T) {
	fx := loadFixture(t)
	tab, _, err := New(&fx.Form, Options{IncludeEditLink: true})
	if err != nil {
		t.Fatal(err)
	}
	subs := make([]*forms.Submission, len(fx.Submissions))
	for i := range fx.Submissions {
		subs[i] = &fx.Submissions[i]
	}
	rec, out, st := build(t, tab, subs...)

	want := map[string][]any{
		"form_id":         {"vdP2jqxK8Uus", "vdP2jqxK8Uus", "vdP2jqxK8Uus"},
		"submission_id":   {"sub-full", "sub-empty", "sub-odd"},
		"submission_time": {"2024-02-01T09:30:00.123Z", "2024-02-01T11:00:00Z", "2024-02-01T12:00:00Z"},
		"last_updated_at": {"2024-02-01T10:00:00Z", nil, nil},
		"started_at":      {"2024-02-01T08:25:00Z", nil, nil},
		"login_email":     {"ada@example.com", nil, nil},
		"quiz_score":      {8.0, nil, nil},
		"quiz_max_score":  {10.0, nil, nil},
		"edit_link":       {"https://forms.example.com/edit/sub-full", nil, nil},
		"documents":       {[]any{map[string]any{"id": "doc1", "name": "Receipt.pdf", "url": "https://docs.example.com/doc1"}}, nil, nil},
		"_batch_id":       {testLin.BatchID, testLin.BatchID, testLin.BatchID},
		"_synced_at":      {"2024-02-02T00:00:00Z", "2024-02-02T00:00:00Z", "2024-02-02T00:00:00Z"},

		"full_name":                          {"Ada Lovelace", nil, nil},
		"full_name__v_json":                  {nil, nil, "42"},
		"comments":                           {"Loved it.\nWould \"recommend\" à tous.", nil, nil},
		"email_address":                      {"ada@example.com", nil, nil},
		"phone_number":                       {"+44 20 7946 0958", nil, nil},
		"website":                            {"https://ada.example.com", nil, nil},
		"favourite_colour":                   {"#ff8800", nil, nil},
		"country":                            {"United Kingdom", nil, nil},
		"plan":                               {"Pro", nil, nil},
		"preferred_time":                     {"14:30", nil, nil},
		"captcha":                            {"verified", nil, nil},
		"age":                                {36.0, nil, nil},
		"age__v_json":                        {nil, nil, `"36"`},
		"budget":                             {1999.99, nil, nil},
		"satisfaction":                       {7.5, nil, nil},
		"rating":                             {int64(4), nil, nil},
		"rating__v_json":                     {nil, nil, "4.5"},
		"how_likely_are_you_to_recommend_us": {int64(9), nil, nil},
		"i_accept_the_terms":                 {true, nil, nil},
		"i_accept_the_terms__v_json":         {nil, nil, `"yes"`},
		"newsletter":                         {false, nil, nil},
		"interests":                          {[]any{"Music", "Sport"}, nil, nil},
		"interests__v_json":                  {nil, nil, `{"Music":true}`},
		"languages":                          {[]any{"Go", "Rust"}, nil, nil},
		"languages__v_json":                  {nil, nil, `["Go",null,7]`},
		"priorities":                         {[]any{"Price", "Quality", "Speed"}, nil, nil},
		"logo":                               {[]any{"logo-b.png"}, nil, nil},
		"date_of_birth":                      {"1815-12-10", nil, nil},
		"date_of_birth__v_json":              {nil, nil, `"2023-02-30"`},
		"appointment":                        {"2024-02-05T13:30:00Z", nil, nil},
		"appointment__v_json":                {nil, nil, `"2024-02-05 14:30"`},
		"vacation":                           {map[string]any{"start": "2024-07-01", "end": "2024-07-14"}, nil, nil},
		"vacation__v_json":                   {nil, nil, `{"start":"2024-07-01T10:00:00Z","end":"2024-07-14"}`},
		"resume": {[]any{
			file("https://files.example.com/cv.pdf", "cv.pdf", "application/pdf", int64(48213)),
			file("https://files.example.com/photo.jpg", "photo.jpg", "image/jpeg", int64(1200000)),
		}, nil, nil},
		"resume__v_json": {nil, nil, `[{"url":"https://x","id":"f1"}]`},
		"signature":      {[]any{file("https://files.example.com/sig.png", "signature.png", "image/png", int64(1024))}, nil, nil},
		"voice_note":     {[]any{file("https://files.example.com/v.webm", "voice.webm", "audio/webm", nil)}, nil, nil},
		"address": {map[string]any{"address": "12 Baker St", "city": "London", "state": nil, "zip_code": "NW1 6XE", "country": "GB"},
			nil, nil},
		"address__v_json":  {nil, nil, `{"address":"1 Main St","zip":"123"}`},
		"location":         {map[string]any{"latitude": 51.5237, "longitude": -0.1585}, nil, nil},
		"location__v_json": {nil, nil, `{"latitude":"51.5","longitude":"-0.1"}`},
		"rate_our_service": {`{"Speed":"Good","Price":["Fair"]}`, nil, `"plain text is JSON too"`},
		"team_members":     {`[{"Name":"Bob","Role":"Dev"}]`, nil, nil},
		"dependents":       {`[{"id":"sf1","questions":[{"id":"n","value":"Tim"}]}]`, nil, nil},
		"pay":              {`{"paymentId":"pi_1","status":"succeeded"}`, nil, nil},
		"book_a_call":      {`{"eventId":123,"startTime":"2024-02-06T10:00:00Z"}`, nil, nil},
		"book_a_demo":      {`"https://calendly.com/e/abc"`, nil, nil},
		"customer_record":  {`["rec_1","rec_2"]`, nil, nil},
		"previous_order":   {`"sub_77"`, nil, nil},

		"calc_total":         {12.5, nil, nil},
		"calc_total__v_json": {nil, nil, `"abc"`},
		"calc_tier":          {"Gold", nil, nil},
		"calc_time_spent":    {"00:05:00", nil, nil},
		"param_utm_source":   {"newsletter", nil, nil},
		"scheduling_meeting": {map[string]any{
			"full_name": "Ada Lovelace", "email": "ada@example.com", "timezone": "Europe/London",
			"event_start_time": "2024-02-05T10:00:00Z", "event_end_time": "2024-02-05T10:30:00.5Z",
			"event_id": "ev_1", "event_url": "https://cal.example.com/ev_1",
			"reschedule_or_cancel_url": "https://cal.example.com/r/ev_1", "user_id": int64(1234),
			"scheduled_user_email": "host@example.com", "meeting_notes": "Bring slides",
		}, nil, nil},
		"scheduling_meeting__v_json": {nil, nil, `{"fullName":"X","userId":"u-1"}`},
		"payment_order": {map[string]any{
			"payment_id": "pay_1", "processor_customer_id": "cus_1",
			"processor_customer_url": "https://pay.example.com/c/cus_1",
			"processor_payment_url":  "https://pay.example.com/p/pay_1", "total_amount": 49.5,
			"currency": "EUR", "email": "ada@example.com", "discount_code": "SPRING",
			"status": "succeeded", "processor_subscription_id": "sub_1",
		}, nil, nil},
		"payment_order__v_json": {nil, nil, `{"paymentId":"p","totalAmount":"49.50"}`},
		"_deleted":              {false, false, false},
	}

	if got := rec.NumRows(); got != 3 {
		t.Fatalf("%d rows, want 3", got)
	}
	for _, name := range columnNames(rec.Schema()) {
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected column %s: %v", name, values(t, rec, name))
			continue
		}
		if got := values(t, rec, name); !reflect.DeepEqual(got, w) {
			t.Errorf("column %s:\n got %#v\nwant %#v", name, got, w)
		}
		delete(want, name)
	}
	for name := range want {
		t.Errorf("missing column %s", name)
	}

	wantMisfits := map[string]int{}
	for _, c := range out.Columns {
		if c.Kind == KindVariantJSON {
			wantMisfits[c.Parent] = 1
		}
		if c.SourceID == "qPassword" || c.SourceID == "qFuture" {
			t.Errorf("column %s for a Password or unknown question", c.Name)
		}
	}
	if len(wantMisfits) != 15 || !maps.Equal(st.Misfits, wantMisfits) {
		t.Errorf("misfits %v, want %v", st.Misfits, wantMisfits)
	}
	if want := map[string]int{"FancyNewWidget": 1}; !maps.Equal(st.Discarded, want) {
		t.Errorf("discarded %v, want %v", st.Discarded, want)
	}
	if st.Rows != 3 || len(st.Changes) != 15 {
		t.Errorf("stats rows %d, changes %d", st.Rows, len(st.Changes))
	}
}

// one builds a one-question table of type typ, appends value and returns
// the typed cell, the __v_json cell ("<none>" when no companion) and stats.
func one(t *testing.T, typ, value string) (any, any, Stats) {
	t.Helper()
	tab := mustNew(t, form(q("q1", "x", typ)))
	rec, _, st := build(t, tab, sub("s1", ans("q1", typ, value)))
	var companion any = "<none>"
	if rec.Schema().HasField("x__v_json") {
		companion = values(t, rec, "x__v_json")[0]
	}
	return values(t, rec, "x")[0], companion, st
}

func TestMisfitsKeptAsJSON(t *testing.T) {
	tests := []struct {
		typ, value, want string
	}{
		{"ShortAnswer", `42`, `42`},
		{"ShortAnswer", `["a"]`, `["a"]`},
		{"ShortAnswer", `true`, `true`},
		{"NumberInput", `"12"`, `"12"`},
		{"NumberInput", `1e400`, `1e400`},
		{"NumberInput", ` { "a" : [ 1, 2 ] } `, `{"a":[1,2]}`},
		{"StarRating", `4.5`, `4.5`},
		{"StarRating", `9223372036854775808`, `9223372036854775808`},
		{"StarRating", `-9223372036854775809`, `-9223372036854775809`},
		// Numbers a column would hold as another number: beyond a double's
		// precision, underflowing, or not quite whole.
		{"NumberInput", `9007199254740993`, `9007199254740993`},
		{"NumberInput", `12345678901234567890`, `12345678901234567890`},
		{"NumberInput", `0.10000000000000000001`, `0.10000000000000000001`},
		{"NumberInput", `1e-400`, `1e-400`},
		{"NumberInput", `-2.5e-324`, `-2.5e-324`},
		{"NumberInput", `100000000000000000000000000000000000000000000000001`, `100000000000000000000000000000000000000000000000001`},
		{"StarRating", `12345678901234567.5`, `12345678901234567.5`},
		{"StarRating", `4.0000000000000001`, `4.0000000000000001`},
		{"StarRating", `1e-400`, `1e-400`},
		{"StarRating", `1e19`, `1e19`},
		{"StarRating", `25e-1`, `25e-1`},
		{"Switch", `"true"`, `"true"`},
		{"Switch", `1`, `1`},
		{"Checkboxes", `"Music"`, `"Music"`},
		{"Checkboxes", `[["nested"]]`, `[["nested"]]`},
		{"Checkboxes", `["a",1]`, `["a",1]`},
		// An empty element: BigQuery takes no null element in an array,
		// and one would fail the whole batch's load.
		{"Checkboxes", `["a", null, ""]`, `["a",null,""]`},
		{"MultiSelect", `[""]`, `[""]`},
		{"Checkboxes", "[ \"a\" ,null,\n\"b\\u00e9\" ]", `["a",null,"b\u00e9"]`},
		{"FileUpload", `[null, {"url":"u"}]`, `[null,{"url":"u"}]`},
		{"FileUpload", `[ { } , {"url":"a"} ]`, `[{},{"url":"a"}]`},
		{"FileUpload", `[{"url":"a"}, ""]`, `[{"url":"a"},""]`},
		{"DatePicker", `"2024-02-01T00:00:00Z"`, `"2024-02-01T00:00:00Z"`},
		{"DatePicker", `"01/02/2024"`, `"01/02/2024"`},
		{"DatePicker", `20240201`, `20240201`},
		{"DatePicker", `"0000-12-31"`, `"0000-12-31"`}, // before year 1: no warehouse takes it
		{"DatePicker", `"2024-02-30"`, `"2024-02-30"`},
		{"DateTimePicker", `"0000-12-31T23:59:59Z"`, `"0000-12-31T23:59:59Z"`},
		{"DateTimePicker", `"9999-12-31T23:59:59-05:00"`, `"9999-12-31T23:59:59-05:00"`}, // year 10000 in UTC
		{"DateTimePicker", `"0001-01-01T00:30:00+01:00"`, `"0001-01-01T00:30:00+01:00"`},
		{"DateTimePicker", `"2024-02-01"`, `"2024-02-01"`},
		{"DateTimePicker", `"2024-02-01T10:00:00"`, `"2024-02-01T10:00:00"`}, // no zone: ambiguous
		{"DateRange", `["2024-01-01","2024-01-02"]`, `["2024-01-01","2024-01-02"]`},
		{"DateRange", `{"start":"2024-01-01","start":"2024-01-02"}`, `{"start":"2024-01-01","start":"2024-01-02"}`},
		{"FileUpload", `{"url":"u"}`, `{"url":"u"}`},
		{"FileUpload", `["https://x/y.pdf"]`, `["https://x/y.pdf"]`},
		{"FileUpload", `[{"url":"u","size":1.5}]`, `[{"url":"u","size":1.5}]`},
		{"FileUpload", `[{"url":"u"},"v"]`, `[{"url":"u"},"v"]`},
		{"FileUpload", `[{"url":"u"},{"url":"v","url":"w"}]`, `[{"url":"u"},{"url":"v","url":"w"}]`},
		{"FileUpload", `[{"url":"u","size":"3"}]`, `[{"url":"u","size":"3"}]`},
		{"Address", `"12 Baker St"`, `"12 Baker St"`},
		{"Address", `{"Address":"x"}`, `{"Address":"x"}`},   // keys match exactly
		{"Address", `{"addressX":"x"}`, `{"addressX":"x"}`}, // the expected key, then more
		{"Address", `{"address":"x","addressX":"y"}`, `{"address":"x","addressX":"y"}`},
		{"Address", `{"address":"x","address":"y"}`, `{"address":"x","address":"y"}`},
		{"Address", `{"city":{"name":"x"}}`, `{"city":{"name":"x"}}`},
		{"LocationCoordinates", `[51.5,-0.1]`, `[51.5,-0.1]`},
		{"Switch", `{"on":true}`, `{"on":true}`},
	}
	for _, tt := range tests {
		typed, companion, st := one(t, tt.typ, tt.value)
		if typed != nil || companion != tt.want || st.Misfits["x"] != 1 {
			t.Errorf("%s %s: typed %v, __v_json %v, misfits %v; want null, %s, 1", tt.typ, tt.value, typed, companion, st.Misfits, tt.want)
		}
	}
}

func TestValuesThatFit(t *testing.T) {
	tests := []struct {
		typ, value string
		want       any
	}{
		{"ShortAnswer", `"a\u00e9\n\"b\""`, "aé\n\"b\""},
		{"ShortAnswer", `"  "`, "  "},
		{"NumberInput", `-0.5e2`, -50.0},
		{"NumberInput", `0.1`, 0.1},
		{"NumberInput", `0.30000000000000004`, 0.30000000000000004},
		{"NumberInput", `123.4500`, 123.45},
		{"NumberInput", `9007199254740992`, 9007199254740992.0},
		{"NumberInput", `1e300`, 1e300},
		{"NumberInput", `5e-324`, 5e-324},
		{"NumberInput", `1.7976931348623157e308`, 1.7976931348623157e308},
		{"NumberInput", `0.000`, 0.0},
		{"NumberInput", `1000000000000000000000000000000`, 1e30},
		{"StarRating", `4.0`, int64(4)},
		{"StarRating", `1e2`, int64(100)},
		{"StarRating", `-9223372036854775808`, int64(-9223372036854775808)},
		{"StarRating", `9007199254740993.0`, int64(9007199254740993)},
		{"StarRating", `9.223372036854775807e18`, int64(9223372036854775807)},
		{"StarRating", `-0.0`, int64(0)},
		{"StarRating", `0e5`, int64(0)},
		{"StarRating", `2500e-2`, int64(25)},
		{"Checkboxes", "[ \"a\" ,\n \"b\\u00e9\",\"c\\\"d\", \"é\" ]", []any{"a", "bé", "c\"d", "é"}},
		{"DatePicker", `"2024-02-29"`, "2024-02-29"},
		{"DatePicker", `"0001-01-01"`, "0001-01-01"},
		{"DatePicker", `"9999-12-31"`, "9999-12-31"},
		{"DateTimePicker", `"0001-01-01T00:00:00Z"`, "0001-01-01T00:00:00Z"},
		{"DateTimePicker", `"9999-12-31T23:59:59.999999Z"`, "9999-12-31T23:59:59.999999Z"},
		{"DateTimePicker", `"9999-12-31T18:59:59+05:00"`, "9999-12-31T13:59:59Z"},
		{"DateTimePicker", `"2024-02-01T10:00:00.123456789-05:00"`, "2024-02-01T15:00:00.123456Z"},
		{"DateRange", `{"start":"2024-01-01"}`, map[string]any{"start": "2024-01-01", "end": nil}},
		{"FileUpload", `[{"url":"u","size":2.0}]`, []any{file("u", nil, nil, int64(2))}},
		// Each file decoded where it starts: spaces, empty strings, escapes
		// and non-ASCII text in and between them.
		{"FileUpload", `[ {"url":"a","filename":""} ,{"url":"b\u00e9","filename":"é.pdf"} ,{"size":3,"url":"c\"d"} ]`,
			[]any{file("a", nil, nil, nil), file("bé", "é.pdf", nil, nil), file("c\"d", nil, nil, int64(3))}},
		{"FileUpload", "[{\"url\" : \"u\" ,\n \"type\":\"application/pdf\"}]", []any{file("u", nil, "application/pdf", nil)}},
		{"Address", `{"city":null,"country":"FR"}`, map[string]any{"address": nil, "city": nil, "state": nil, "zip_code": nil, "country": "FR"}},
		// Keys in any order, and escaped: the expected one is matched in
		// place, the others read.
		{"Address", `{"country":"FR","addr\u0065ss":"1 rue","city":"Paris"}`, map[string]any{"address": "1 rue", "city": "Paris", "state": nil, "zip_code": nil, "country": "FR"}},
		{"Matrix", `[1, "two"]`, `[1,"two"]`},
		{"Matrix", `12`, `12`},
	}
	for _, tt := range tests {
		typed, companion, st := one(t, tt.typ, tt.value)
		if !reflect.DeepEqual(typed, tt.want) || companion != "<none>" || st.Misfits != nil {
			t.Errorf("%s %s: typed %#v, __v_json %v; want %#v and no companion", tt.typ, tt.value, typed, companion, tt.want)
		}
	}
}

func TestEmptyAnswersAreNull(t *testing.T) {
	empties := []string{`null`, `""`, `[]`, `{}`, ` [ ] `, "{\n}", ``}
	for typ := range questionTypes {
		if typ == "Password" {
			continue
		}
		for _, v := range empties {
			typed, companion, st := one(t, typ, v)
			if typed != nil || companion != "<none>" || st.Misfits != nil {
				t.Errorf("%s %q: typed %v, __v_json %v, misfits %v; want all null", typ, v, typed, companion, st.Misfits)
			}
		}
	}
}

func TestInvalidJSONKeptVerbatim(t *testing.T) {
	typed, companion, st := one(t, "ShortAnswer", `{"a":`)
	if typed != nil || companion != `{"a":` || st.Misfits["x"] != 1 {
		t.Errorf("typed %v, __v_json %v, misfits %v", typed, companion, st.Misfits)
	}
}

func TestCalculations(t *testing.T) {
	tests := []struct {
		typ, value string
		want, json any
	}{
		{"number", "12.50", 12.5, nil},
		{"number", "-3", -3.0, nil},
		{"number", "1e3", 1000.0, nil},
		{"number", "abc", nil, `"abc"`},
		{"number", "12,50", nil, `"12,50"`},
		{"number", " 12.5", nil, `" 12.5"`},
		{"number", "Inf", nil, `"Inf"`},
		{"number", "0x10", nil, `"0x10"`},
		{"number", "1e999", nil, `"1e999"`},
		{"number", "<5>", nil, `"<5>"`},
		{"number", "", nil, nil},
	}
	for _, tt := range tests {
		f := form()
		f.Calculations = []forms.Field{{ID: "c1", Name: "Total", Type: tt.typ}}
		s := sub("s1")
		s.Calculations = []forms.Calculation{{ID: "c1", Name: "Total", Type: tt.typ, Value: tt.value}}
		rec, _, _ := build(t, mustNew(t, f), s)
		if got := values(t, rec, "calc_total")[0]; got != tt.want {
			t.Errorf("%q: calc_total %v, want %v", tt.value, got, tt.want)
		}
		var companion any
		if rec.Schema().HasField("calc_total__v_json") {
			companion = values(t, rec, "calc_total__v_json")[0]
		}
		if companion != tt.json {
			t.Errorf("%q: calc_total__v_json %v, want %v", tt.value, companion, tt.json)
		}
	}
}

func TestCalculationRouting(t *testing.T) {
	f := form()
	f.Calculations = []forms.Field{{ID: "c1", Name: "Total", Type: "number"}}
	s := sub("s1")
	s.Calculations = []forms.Calculation{
		{ID: "c1", Value: "3"},                  // no type: the current column
		{ID: "c1", Type: "number", Value: "4"},  // repeated: kept as JSON text
		{ID: "c1", Type: "text", Value: "four"}, // another type: a variant
		{ID: "c9", Name: "Fresh", Value: "x"},   // unknown and typeless: text
	}
	rec, _, st := build(t, mustNew(t, f), s)
	want := map[string]any{"calc_total": 3.0, "calc_total__v_json": `"4"`, "calc_total__v_string": "four", "calc_fresh": "x"}
	for name, w := range want {
		if got := values(t, rec, name)[0]; got != w {
			t.Errorf("%s = %v, want %v", name, got, w)
		}
	}
	if st.Misfits["calc_total"] != 1 {
		t.Errorf("misfits %v", st.Misfits)
	}
}

func TestUnknownTypeDiscarded(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Holo", "FancyNewWidget"), q("q2", "Name", "ShortAnswer")))
	rec, out, st := build(t, tab,
		sub("s1", ans("q1", "FancyNewWidget", `{"x":1}`), ans("q2", "ShortAnswer", `"a"`)),
		sub("s2", ans("q1", "FancyNewWidget", `2`), ans("q3", "OtherWidget", `3`)),
		sub("s3", ans("q1", "", `"typeless, so the metadata's type decides"`)))
	want := map[string]int{"FancyNewWidget": 3, "OtherWidget": 1}
	if !maps.Equal(st.Discarded, want) {
		t.Errorf("discarded %v, want %v", st.Discarded, want)
	}
	if got := sourceColumns(out); !slices.Equal(got, []string{"name:string"}) {
		t.Errorf("columns %q", got)
	}
	if got := values(t, rec, "name"); !reflect.DeepEqual(got, []any{"a", nil, nil}) {
		t.Errorf("name %v", got)
	}
}

func TestPasswordAnswersDropped(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Secret", "Password")))
	_, out, st := build(t, tab,
		sub("s1", ans("q1", "Password", `"hunter2"`)),
		sub("s2", ans("q1", "", `"hunter2"`)),
		sub("s3", ans("q9", "Password", `"hunter2"`)))
	if got := sourceColumns(out); len(got) != 0 || st.Discarded != nil || st.Misfits != nil {
		t.Errorf("columns %q, discarded %v, misfits %v", got, st.Discarded, st.Misfits)
	}
}

// TestRoutingByAnswerType covers answers whose type or id the table does
// not know yet: the builder evolves and back-fills nulls.
func TestRoutingByAnswerType(t *testing.T) {
	tab := mustNew(t, form(q("q1", "Score", "ShortAnswer")))
	tab, _ = mustEvolve(t, tab, form(q("q1", "Score", "NumberInput"))) // score, score__v_double
	rec, out, st := build(t, tab,
		sub("s1", ans("q1", "ShortAnswer", `"old"`)),
		sub("s2", ans("q1", "NumberInput", `7`)),
		sub("s3", ans("q1", "", `8`)),           // no type: the current column
		sub("s4", ans("q1", "StarRating", `5`)), // a type the table lacks: a new variant
		sub("s5", forms.Answer{ID: "qNew", Name: "Colour", Type: "ShortAnswer", Value: []byte(`"red"`)}), // a new question
		sub("s6", forms.Answer{ID: "qBare", Name: "Bare", Value: []byte(`{"k":1}`)}),                     // new and typeless
	)
	want := map[string][]any{
		"score":           {"old", nil, nil, nil, nil, nil},
		"score__v_double": {nil, 7.0, 8.0, nil, nil, nil},
		"score__v_int64":  {nil, nil, nil, int64(5), nil, nil},
		"colour":          {nil, nil, nil, nil, "red", nil},
		"bare":            {nil, nil, nil, nil, nil, `{"k":1}`},
		"submission_id":   {"s1", "s2", "s3", "s4", "s5", "s6"},
	}
	for name, w := range want {
		if got := values(t, rec, name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: got %v, want %v", name, got, w)
		}
	}
	if got := changeKinds(st.Changes); !slices.Equal(got, []string{"variant score__v_int64", "added colour", "added bare"}) {
		t.Errorf("changes %q", got)
	}
	if got := route(t, out, KindQuestion, "q1"); got != "score__v_double" {
		t.Errorf("an answer's type moved the question's route to %q", got)
	}
	if got := route(t, out, KindQuestion, "qNew"); got != "colour" {
		t.Errorf("new question routes to %q", got)
	}
	// The evolved table is what the next pass starts from: metadata that now
	// lists the typeless question as ShortAnswer adds a variant.
	next, _ := mustEvolve(t, out, form(q("q1", "Score", "NumberInput"), q("qBare", "Bare", "ShortAnswer")))
	if got := route(t, next, KindQuestion, "qBare"); got != "bare__v_string" {
		t.Errorf("qBare routes to %q", got)
	}
}

// An answer the API sends more than once in one submission: the first
// that fits is typed, every other is kept, none dropped.
func TestRepeatedAnswersAllKept(t *testing.T) {
	tests := []struct {
		typ       string
		values    []string
		typed     any
		companion any
		misfits   int
	}{
		{"ShortAnswer", []string{`"a"`}, "a", "<none>", 0},
		{"ShortAnswer", []string{`"a"`, `"b"`}, "a", `"b"`, 1},
		{"ShortAnswer", []string{`"a"`, `"b"`, `"c"`}, "a", `["b","c"]`, 2},
		{"ShortAnswer", []string{`"a"`, `"b"`, `"c"`, `"d"`}, "a", `["b","c","d"]`, 3},
		{"NumberInput", []string{`"x"`, `5`, `6`}, 5.0, `["x",6]`, 2},
		{"NumberInput", []string{`5`, `{"a":`, `7`}, 5.0, `["{\"a\":",7]`, 2}, // not JSON: a string of it
		{"Checkboxes", []string{`["a"]`, `["b"]`, `["c","d"]`}, []any{"a"}, `[["b"],["c","d"]]`, 2},
	}
	for _, tt := range tests {
		tab := mustNew(t, form(q("q1", "x", tt.typ)))
		var answers []forms.Answer
		for _, v := range tt.values {
			answers = append(answers, ans("q1", tt.typ, v))
		}
		// A second row without answers: the kept values are the first row's only.
		rec, _, st := build(t, tab, sub("s1", answers...), sub("s2"))
		var companion any = "<none>"
		if rec.Schema().HasField("x__v_json") {
			companion = values(t, rec, "x__v_json")[0]
			if second := values(t, rec, "x__v_json")[1]; second != nil {
				t.Errorf("%s %v: the next row's __v_json is %v", tt.typ, tt.values, second)
			}
		}
		if typed := values(t, rec, "x")[0]; !reflect.DeepEqual(typed, tt.typed) || companion != tt.companion || st.Misfits["x"] != tt.misfits {
			t.Errorf("%s %v: typed %#v, __v_json %v, misfits %d; want %#v, %v, %d", tt.typ, tt.values, typed, companion, st.Misfits["x"], tt.typed, tt.companion, tt.misfits)
		}
	}
}

func TestBuilderErrors(t *testing.T) {
	tab := mustNew(t, form())
	b := NewBuilder(tab, nil)
	tests := []struct {
		name string
		sub  *forms.Submission
		lin  Lineage
	}{
		{"nil submission", nil, testLin},
		{"no id", &forms.Submission{SubmissionTime: testTime}, testLin},
		{"no submission time", &forms.Submission{SubmissionID: "s1"}, testLin},
		{"no batch", sub("s1"), Lineage{SyncedAt: testTime}},
		{"no sync time", sub("s1"), Lineage{BatchID: "b"}},
	}
	for _, tt := range tests {
		if err := b.Append(tt.sub, tt.lin); err == nil {
			t.Errorf("%s: Append succeeded", tt.name)
		}
	}
	if b.Len() != 0 {
		t.Errorf("failed appends left %d rows", b.Len())
	}
	b.Release()
	if err := b.Append(sub("s1"), testLin); err == nil {
		t.Error("Append after Release succeeded")
	}
	rec, _, _ := b.Finish()
	if rec.NumRows() != 0 || int(rec.NumCols()) != len(tab.Columns) {
		t.Errorf("Finish after Release: %d rows, %d columns", rec.NumRows(), rec.NumCols())
	}
	rec.Release()

	bad := tab.Clone()
	bad.Columns[0].Type = "decimal"
	if err := NewBuilder(bad, nil).Append(sub("s1"), testLin); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Errorf("builder on an invalid table: %v", err)
	}
}

// TestFinishTwice checks that a Builder can go on after Finish with its
// evolved table, and that the second record holds only the new rows.
func TestFinishTwice(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := NewBuilder(mustNew(t, form(q("q1", "x", "NumberInput"))), mem)
	defer b.Release()
	if err := b.Append(sub("s1", ans("q1", "NumberInput", `"bad"`)), testLin); err != nil {
		t.Fatal(err)
	}
	rec1, _, st1 := b.Finish()
	defer rec1.Release()
	if err := b.Append(sub("s2", ans("q1", "NumberInput", `3`)), testLin); err != nil {
		t.Fatal(err)
	}
	rec2, tab2, st2 := b.Finish()
	defer rec2.Release()
	if rec1.NumRows() != 1 || rec2.NumRows() != 1 || st1.Misfits["x"] != 1 || st2.Misfits != nil || len(st2.Changes) != 0 {
		t.Fatalf("rows %d/%d, stats %+v / %+v", rec1.NumRows(), rec2.NumRows(), st1, st2)
	}
	if got := values(t, rec2, "x__v_json"); got[0] != nil {
		t.Errorf("second record x__v_json %v", got)
	}
	if got := values(t, rec2, "x"); got[0] != 3.0 {
		t.Errorf("second record x %v", got)
	}
	if !tab2.ArrowSchema().Equal(rec2.Schema()) {
		t.Error("schema mismatch")
	}
}

func TestSubmissionTimesAreUTCMicros(t *testing.T) {
	loc := time.FixedZone("X", -5*3600)
	s := sub("s1")
	s.SubmissionTime = time.Date(2024, 2, 1, 4, 0, 0, 123456789, loc)
	rec, _, _ := build(t, mustNew(t, form()), s)
	if got := values(t, rec, "submission_time")[0]; got != "2024-02-01T09:00:00.123456Z" {
		t.Errorf("submission_time %v", got)
	}
}

// TestRoutesRemembered appends submissions that list their answers in the
// same order (the routes the builder remembers by position) and then break
// it: swapped positions, a new type at a known position, an unknown type
// repeated, and a password (never exported), each routed as if alone.
func TestRoutesRemembered(t *testing.T) {
	tab := mustNew(t, form(q("a", "A", "ShortAnswer"), q("b", "B", "NumberInput"), q("p", "P", "Password")))
	tests := []struct {
		name string
		subs []*forms.Submission
		want map[string][]any
		disc int // answers of the unknown type discarded
	}{
		{
			name: "same order",
			subs: []*forms.Submission{
				sub("s1", ans("a", "ShortAnswer", `"x"`), ans("b", "NumberInput", `1`)),
				sub("s2", ans("a", "ShortAnswer", `"y"`), ans("b", "NumberInput", `2`)),
			},
			want: map[string][]any{"a": {"x", "y"}, "b": {1.0, 2.0}},
		},
		{
			name: "swapped",
			subs: []*forms.Submission{
				sub("s1", ans("a", "ShortAnswer", `"x"`), ans("b", "NumberInput", `1`)),
				sub("s2", ans("b", "NumberInput", `2`), ans("a", "ShortAnswer", `"y"`)),
				sub("s3", ans("a", "ShortAnswer", `"z"`), ans("b", "NumberInput", `3`)),
			},
			want: map[string][]any{"a": {"x", "y", "z"}, "b": {1.0, 2.0, 3.0}},
		},
		{
			name: "new type at a known position, then the old one",
			subs: []*forms.Submission{
				sub("s1", ans("a", "ShortAnswer", `"x"`), ans("b", "NumberInput", `1`)),
				sub("s2", ans("a", "ShortAnswer", `"y"`), ans("b", "StarRating", `4`)),
				sub("s3", ans("a", "ShortAnswer", `"z"`), ans("b", "NumberInput", `3`)),
				sub("s4", ans("a", "ShortAnswer", `"w"`), ans("b", "StarRating", `5`)),
			},
			want: map[string][]any{"a": {"x", "y", "z", "w"}, "b": {1.0, nil, 3.0, nil}, "b__v_int64": {nil, int64(4), nil, int64(5)}},
		},
		{
			name: "unknown type and password at a remembered position",
			subs: []*forms.Submission{
				sub("s1", ans("a", "ShortAnswer", `"x"`), ans("p", "Password", `"secret"`)),
				sub("s2", ans("a", "Hologram", `"h"`), ans("p", "Password", `"secret"`)),
				sub("s3", ans("a", "Hologram", `"h"`), ans("p", "Password", `"secret"`)),
				sub("s4", ans("a", "ShortAnswer", `"y"`), ans("p", "Password", `"secret"`)),
			},
			want: map[string][]any{"a": {"x", nil, nil, "y"}},
			disc: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, _, st := build(t, tab, tt.subs...)
			for name, w := range tt.want {
				if got := values(t, rec, name); !reflect.DeepEqual(got, w) {
					t.Errorf("%s: got %v, want %v", name, got, w)
				}
			}
			if got := st.Discarded["Hologram"]; got != tt.disc {
				t.Errorf("discarded %d, want %d", got, tt.disc)
			}
			for _, f := range rec.Schema().Fields() {
				if strings.HasPrefix(f.Name, "p") {
					t.Errorf("password exported as %s", f.Name)
				}
			}
		})
	}
}
