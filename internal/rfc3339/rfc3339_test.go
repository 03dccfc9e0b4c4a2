package rfc3339

import (
	"math/rand/v2"
	"testing"
	"time"
)

// agrees checks Parse against time.Parse(time.RFC3339Nano) on s: what
// Parse accepts, time.Parse accepts as the same instant, in UTC.
func agrees(t *testing.T, s string) (accepted bool) {
	t.Helper()
	got, ok := Parse([]byte(s))
	want, err := time.Parse(time.RFC3339Nano, s)
	if !ok {
		return false
	}
	if err != nil {
		t.Errorf("Parse(%q) = %v, but time.Parse refuses it: %v", s, got, err)
		return true
	}
	if !got.Equal(want) || got != want.UTC() || got.Location() != time.UTC {
		t.Errorf("Parse(%q) = %v, time.Parse: %v", s, got, want.UTC())
	}
	return true
}

func TestParse(t *testing.T) {
	tests := []struct {
		in     string
		accept bool // by the fast path; false: left to time.Parse
	}{
		{"2024-03-01T12:34:56Z", true},
		{"2024-03-01T12:34:56.789Z", true},
		{"2024-03-01T12:34:56.000000001Z", true},
		{"2024-03-01T12:34:56.123456789+05:30", true},
		{"2024-03-01T00:00:00-00:00", true},
		{"2024-03-01T00:30:00+01:00", true}, // the UTC day before
		{"2024-02-29T23:59:59Z", true},
		{"2000-02-29T00:00:00Z", true},
		{"0000-01-01T00:00:00Z", true}, // callers refuse year 0 themselves
		{"9999-12-31T23:59:59.999999999-23:59", true},
		{"2023-02-29T00:00:00Z", false},
		{"1900-02-29T00:00:00Z", false},
		{"2024-04-31T00:00:00Z", false},
		{"2024-13-01T00:00:00Z", false},
		{"2024-00-01T00:00:00Z", false},
		{"2024-03-00T00:00:00Z", false},
		{"2024-03-01T24:00:00Z", false},
		{"2024-03-01T23:60:00Z", false},
		{"2024-03-01T23:59:60Z", false},
		{"2024-03-01T12:34:56.Z", false},
		{"2024-03-01T12:34:56.1234567891Z", false}, // 10 digits: time.Parse decides
		{"2024-03-01T12:34:56,5Z", false},
		{"2024-03-01t12:34:56Z", false},
		{"2024-03-01T12:34:56z", false},
		{"2024-03-01 12:34:56Z", false},
		{"2024-03-01T12:34:56", false},
		{"2024-03-01T12:34:56+0100", false},
		{"2024-03-01T12:34:56+01", false},
		{"2024-03-01T12:34:56+24:00", false},
		{"2024-03-01T12:34:56+01:60", false},
		{"2024-03-01T12:34:56Z ", false},
		{" 2024-03-01T12:34:56Z", false},
		{"+024-03-01T12:34:56Z", false},
		{"2024-3-01T12:34:56Z", false},
		{"2024-03-01T12:34:5aZ", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := agrees(t, tc.in); got != tc.accept {
			t.Errorf("Parse(%q) accepted %v, want %v", tc.in, got, tc.accept)
		}
	}
}

// TestParseAgreesWithTime: random timestamps, many of them broken one byte
// at a time, never read otherwise than time.Parse reads them.
func TestParseAgreesWithTime(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := "0123456789-:.TZ+ z"
	accepted := 0
	for range 200_000 {
		// Any instant of years 0000 to 9999.
		first, last := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Unix()
		at := time.Unix(first+r.Int64N(last-first), r.Int64N(1e9)).UTC()
		s := at.Format(time.RFC3339Nano)
		if r.IntN(3) == 0 {
			s = at.In(time.FixedZone("", (r.IntN(48)-24)*1800)).Format(time.RFC3339Nano)
		}
		if r.IntN(2) == 0 {
			b := []byte(s)
			b[r.IntN(len(b))] = alphabet[r.IntN(len(alphabet))]
			s = string(b)
		}
		if agrees(t, s) {
			accepted++
		}
	}
	if accepted < 100_000 {
		t.Errorf("the fast path read %d of 200,000 timestamps; most are of its shape", accepted)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"2024-03-01T12:34:56.789Z", "2024-02-29T23:59:59+05:30", "0000-01-01T00:00:00-00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { agrees(t, s) })
}

func BenchmarkParse(b *testing.B) {
	s := []byte("2024-03-01T12:34:56.789Z")
	for b.Loop() {
		if _, ok := Parse(s); !ok {
			b.Fatal("not read")
		}
	}
}

func BenchmarkTimeParse(b *testing.B) {
	s := []byte("2024-03-01T12:34:56.789Z")
	for b.Loop() {
		if _, err := time.Parse(time.RFC3339Nano, string(s)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestParseDate holds ParseDate to time.Parse(time.DateOnly): every day of
// years 0000-9999 sampled, and broken dates.
func TestParseDate(t *testing.T) {
	check := func(s string) {
		t.Helper()
		got, ok := ParseDate([]byte(s))
		want, err := time.Parse(time.DateOnly, s)
		if ok != (err == nil) {
			t.Errorf("ParseDate(%q) ok %v, time.Parse: %v", s, ok, err)
			return
		}
		if ok && got != want.Unix()/86400 {
			t.Errorf("ParseDate(%q) = %d, want %d", s, got, want.Unix()/86400)
		}
	}
	for _, s := range []string{"1970-01-01", "1969-12-31", "0000-01-01", "9999-12-31", "2024-02-29", "2023-02-29",
		"1900-02-29", "2000-02-29", "2024-04-31", "2024-13-01", "2024-00-10", "2024-01-00", "2024-1-01", "2024/01/01", "", "2024-01-011"} {
		check(s)
	}
	for d := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 10000; d = d.AddDate(0, 0, 37) {
		check(d.Format(time.DateOnly))
	}
}
