package poller

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"time"
)

// batchTimeLayout is compact and safe in file names and BigQuery job ids.
const batchTimeLayout = "20060102T150405.000Z"

var unsafeIDChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// BatchID names the batch of one form's window. It is a pure function of the
// form and the window, so a rerun after a crash finds the same name. It
// starts with the window's start, so files sort by time and the name never
// begins with "." or "_", which readers treat as hidden.
func BatchID(formID string, start, end time.Time) string {
	id := unsafeIDChars.ReplaceAllString(formID, "_")
	if id != formID || len(id) > 64 {
		// Keep distinct ids distinct once their unsafe characters are folded.
		sum := sha256.Sum256([]byte(formID))
		if len(id) > 48 {
			id = id[:48]
		}
		id += "_" + hex.EncodeToString(sum[:4])
	}
	return stamp(start) + "-" + stamp(end) + "-" + id
}

func stamp(t time.Time) string {
	return strings.Replace(t.UTC().Format(batchTimeLayout), ".", "", 1)
}

// dayStart is the UTC midnight at or before t.
func dayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// floorMS drops sub-millisecond precision: the API speaks milliseconds.
func floorMS(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// ceilMS rounds up to the next millisecond unless t is already on one.
func ceilMS(t time.Time) time.Time {
	f := floorMS(t)
	if f.Equal(t) {
		return f
	}
	return f.Add(time.Millisecond)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// midpoint splits [a, b) on a millisecond boundary strictly inside it, or
// returns b when the window is a single millisecond and cannot be split.
func midpoint(a, b time.Time) time.Time {
	m := floorMS(a.Add(b.Sub(a) / 2))
	if !m.After(a) {
		m = a.Add(time.Millisecond)
	}
	if !m.Before(b) {
		return b
	}
	return m
}
