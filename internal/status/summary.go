package status

import (
	"context"
	"errors"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
)

// StreamResult is one stream's result in a pass's summary, as --summary
// and -o json of once, backfill, refresh and reconcile write it, and as a
// daemon sends a backfill's outcome to the command that asked for it. Its
// field names are part of syncd's interface (README, "Machine-readable
// output").
type StreamResult struct {
	Account      string     `json:"account,omitempty"`
	Source       string     `json:"source"`  // forms, scheduling
	Stream       string     `json:"form_id"` // the stream; empty for a source that failed before its streams ran
	Table        string     `json:"table"`
	Status       string     `json:"status"` // ok, failed, interrupted
	Rows         int64      `json:"rows"`
	Batches      int        `json:"batches"`
	Requests     int64      `json:"requests"`
	Misfits      int64      `json:"values_kept_as_json"`
	Discarded    int64      `json:"unknown_type_answers_discarded"`
	Seconds      float64    `json:"duration_seconds"`
	CoveredStart *time.Time `json:"covered_start"` // null: nothing committed
	CoveredEnd   *time.Time `json:"covered_end"`
	ClampedTo    *time.Time `json:"clamped_to"` // null: the range was not cut at now - safety_lag
	Error        string     `json:"error"`
	// What a reconcile in the pass wrote (reconcile, or a pass whose
	// lookback was due): committed windows read again, version rows (edits
	// and late imports) and tombstones (deletions).
	Reconciled        bool  `json:"reconciled"`
	ReconciledWindows int64 `json:"reconciled_windows"`
	Versions          int64 `json:"versions"`
	Tombstones        int64 `json:"tombstones"`
}

// Outcome is a stream's outcome in a pass: ok, failed or interrupted. A
// stream whose pass the end of the shutdown grace cancelled counts as
// interrupted, not failed, when a signal stopped the pass (signalled).
func Outcome(r poller.Result, signalled bool) string {
	switch {
	case r.Interrupted, signalled && r.Err != nil && errors.Is(r.Err, context.Canceled):
		return "interrupted"
	case r.Err != nil:
		return "failed"
	default:
		return "ok"
	}
}

// Failed counts the results whose Outcome is failed.
func Failed(results []poller.Result, signalled bool) int {
	n := 0
	for _, r := range results {
		if Outcome(r, signalled) == "failed" {
			n++
		}
	}
	return n
}

// Summarize is results as a pass's summary lists them.
func Summarize(results []poller.Result, signalled bool) []StreamResult {
	out := make([]StreamResult, 0, len(results))
	for _, r := range results {
		e := StreamResult{Account: r.Account, Source: r.Source, Stream: r.Stream, Table: r.Table, Status: Outcome(r, signalled), Rows: r.Rows, Batches: r.Batches, Requests: r.Requests,
			Misfits: r.Misfits, Discarded: r.Discarded, Seconds: r.Duration.Seconds(), CoveredStart: TimePtr(r.CoveredStart), CoveredEnd: TimePtr(r.CoveredEnd),
			ClampedTo: TimePtr(r.ClampedTo), Reconciled: r.Reconciled, ReconciledWindows: r.ReconciledWindows, Versions: r.Versions, Tombstones: r.Tombstones}
		if r.Err != nil {
			e.Error = r.Err.Error()
		}
		out = append(out, e)
	}
	return out
}

// Result is the result e describes, for printing a daemon's summary as the
// command alone prints its own results.
func (e StreamResult) Result() poller.Result {
	r := poller.Result{Account: e.Account, Source: e.Source, Stream: e.Stream, Table: e.Table, Rows: e.Rows, Batches: e.Batches,
		Requests: e.Requests, Misfits: e.Misfits, Discarded: e.Discarded, Duration: time.Duration(e.Seconds * float64(time.Second)),
		Interrupted: e.Status == "interrupted", Reconciled: e.Reconciled, ReconciledWindows: e.ReconciledWindows, Versions: e.Versions, Tombstones: e.Tombstones}
	if e.CoveredStart != nil {
		r.CoveredStart = *e.CoveredStart
	}
	if e.CoveredEnd != nil {
		r.CoveredEnd = *e.CoveredEnd
	}
	if e.ClampedTo != nil {
		r.ClampedTo = *e.ClampedTo
	}
	if e.Error != "" {
		r.Err = errors.New(e.Error)
	}
	return r
}
