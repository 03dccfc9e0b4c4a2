package app

import (
	"strings"
	"testing"
	"time"
)

func TestBackfillRange(t *testing.T) {
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, from, to string
		toGiven        bool
		want           string // an error's start, or "" for none
		start, end     time.Time
	}{
		{name: "dates", from: "2024-01-31", to: "2024-07-01", toGiven: true,
			start: time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC), end: time.Date(2024, 7, 1, 0, 0, 0, 0, time.UTC)},
		{name: "no to is now", from: "2024-01-31", start: time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC), end: now},
		{name: "empty from", from: " ", want: "--from is empty"},
		{name: "empty to given", from: "2024-01-31", toGiven: true, want: "--to is empty"},
		{name: "bad from", from: "31/01/2024", want: "--from: "},
		{name: "bad to", from: "2024-01-31", to: "July", toGiven: true, want: "--to: "},
		{name: "reversed", from: "2024-07-01", to: "2024-01-31", toGiven: true, want: "--from 2024-07-01T00:00:00Z is not before --to 2024-01-31T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start, end, err := BackfillRange(tc.from, tc.to, tc.toGiven, now)
			if tc.want != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
					t.Fatalf("error %v, want one starting %q", err, tc.want)
				}
				return
			}
			if err != nil || !start.Equal(tc.start) || !end.Equal(tc.end) {
				t.Fatalf("got [%s, %s) %v, want [%s, %s)", start, end, err, tc.start, tc.end)
			}
		})
	}
}

func TestFromBeforeHorizon(t *testing.T) {
	h := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	if err := FromBeforeHorizon(h.Add(-time.Second), h, "backfill"); err != nil {
		t.Fatalf("a start before the horizon: %v", err)
	}
	if err := FromBeforeHorizon(h, h, "reconcile"); err == nil || !strings.Contains(err.Error(), "nothing to reconcile yet") {
		t.Fatalf("a start at the horizon: %v", err)
	}
}

func TestClipToHorizon(t *testing.T) {
	h := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	if end, note := ClipToHorizon(h.Add(-time.Hour), h); !end.Equal(h.Add(-time.Hour)) || note != "" {
		t.Fatalf("an end before the horizon: %s %q", end, note)
	}
	end, note := ClipToHorizon(h.Add(time.Hour), h)
	if !end.Equal(h) || !strings.Contains(note, "is past now - sync.safety_lag; backfilling up to 2026-12-06T00:00:00Z instead") {
		t.Fatalf("an end past the horizon: %s %q", end, note)
	}
}
