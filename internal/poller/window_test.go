package poller

import (
	"strings"
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestBatchID(t *testing.T) {
	a, b := ts("2024-03-01T00:00:00Z"), ts("2024-03-01T12:30:00.250Z")
	tests := []struct {
		form string
		want string
	}{
		{"abc123", "20240301T000000000Z-20240301T123000250Z-abc123"},
		{"_hidden", "20240301T000000000Z-20240301T123000250Z-_hidden"},
		{"ABC-x_9", "20240301T000000000Z-20240301T123000250Z-ABC-x_9"},
	}
	for _, tt := range tests {
		if got := BatchID(tt.form, a, b); got != tt.want {
			t.Errorf("BatchID(%q) = %q, want %q", tt.form, got, tt.want)
		}
	}
	// Unsafe characters are folded but distinct ids stay distinct.
	x, y := BatchID("a/b", a, b), BatchID("a.b", a, b)
	if x == y || strings.ContainsAny(x+y, "/.") {
		t.Errorf("unsafe ids: %q %q", x, y)
	}
	if BatchID("abc123", a, b) != BatchID("abc123", a, b) {
		t.Error("not deterministic")
	}
}

func TestMidpoint(t *testing.T) {
	tests := []struct {
		a, b, want string
	}{
		{"2024-03-01T00:00:00Z", "2024-03-02T00:00:00Z", "2024-03-01T12:00:00Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.003Z", "2024-03-01T00:00:00.001Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.002Z", "2024-03-01T00:00:00.001Z"},
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00.001Z", "2024-03-01T00:00:00.001Z"}, // cannot split: b
	}
	for _, tt := range tests {
		got := midpoint(ts(tt.a), ts(tt.b))
		if !got.Equal(ts(tt.want)) {
			t.Errorf("midpoint(%s, %s) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
		if got.Before(ts(tt.a)) || got.After(ts(tt.b)) {
			t.Errorf("midpoint outside the window")
		}
	}
}

func TestDayBounds(t *testing.T) {
	tests := []struct{ in, day string }{
		{"2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{"2024-03-01T23:59:59.999Z", "2024-03-01T00:00:00Z"},
		{"2024-02-29T10:00:00+05:00", "2024-02-29T00:00:00Z"},
		{"2024-12-31T22:00:00-03:00", "2025-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		if got := dayStart(ts(tt.in)); !got.Equal(ts(tt.day)) {
			t.Errorf("dayStart(%s) = %s", tt.in, got)
		}
	}
}
