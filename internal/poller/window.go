package poller

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
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
	return stamp(start) + "-" + stamp(end) + "-" + streamPart(formID)
}

// streamPart is how a batch id names its stream: safe in file names and
// job ids.
func streamPart(formID string) string {
	id := unsafeIDChars.ReplaceAllString(formID, "_")
	if id != formID || len(id) > 64 {
		// Keep distinct ids distinct once their unsafe characters are folded.
		sum := sha256.Sum256([]byte(formID))
		if len(id) > 48 {
			id = id[:48]
		}
		id += "_" + hex.EncodeToString(sum[:4])
	}
	return id
}

// BatchName is what a batch id says of its batch.
type BatchName struct {
	Start, End time.Time
	Generation int   // the stream's generation (-gN; 0 without)
	Reconcile  int64 // the reconcile pass's start in Unix ms (-rN), 0 for a batch of new rows
}

// ParseBatchID reads the batch id of one of stream's batches; ok is false
// for an id of another stream, or one that BatchID never made.
func ParseBatchID(stream, id string) (n BatchName, ok bool) {
	const stampLen = len("20060102T150405000Z")
	if len(id) < 2*stampLen+2 || id[stampLen] != '-' || id[2*stampLen+1] != '-' {
		return n, false
	}
	var err error
	if n.Start, err = parseStamp(id[:stampLen]); err != nil {
		return n, false
	}
	if n.End, err = parseStamp(id[stampLen+1 : 2*stampLen+1]); err != nil {
		return n, false
	}
	rest, found := strings.CutPrefix(id[2*stampLen+2:], streamPart(stream))
	if !found {
		return n, false
	}
	if r, ok := strings.CutPrefix(rest, "-g"); ok {
		digits, after, more := strings.Cut(r, "-")
		if n.Generation, err = strconv.Atoi(digits); err != nil || n.Generation <= 0 {
			return n, false
		}
		rest = ""
		if more {
			rest = "-" + after
		}
	}
	if r, ok := strings.CutPrefix(rest, "-r"); ok {
		if n.Reconcile, err = strconv.ParseInt(r, 10, 64); err != nil || n.Reconcile <= 0 {
			return n, false
		}
		rest = ""
	}
	return n, rest == ""
}

// parseStamp reads what stamp writes.
func parseStamp(s string) (time.Time, error) {
	return time.Parse(batchTimeLayout, s[:15]+"."+s[15:])
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
