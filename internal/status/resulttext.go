package status

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// The text form of a pass's results, as once, backfill, reconcile and
// refresh print them without -o json; Summarize is their JSON form.

// WriteResults writes one line per stream: what a person running a CronJob
// wants to read in its log.
func WriteResults(w io.Writer, results []poller.Result, took time.Duration, signalled bool) {
	var rows int64
	stopped := 0
	for _, r := range results {
		rows += r.Rows
		switch Outcome(r, signalled) {
		case "failed":
			// The error often starts with the stream's name: say it once.
			fmt.Fprintf(w, "FAIL %s: %s\n", streamName(r), strings.TrimPrefix(r.Err.Error(), streamName(r)+": "))
		case "interrupted":
			stopped++
			fmt.Fprintf(w, "STOP %s -> %s: interrupted after %s in %s, %s%s; the rest comes with the next pass\n",
				r.Stream, textfmt.OrDash(r.Table), textfmt.Plural(r.Rows, "row"), textfmt.Plural(int64(r.Batches), "batch"), textfmt.Plural(r.Requests, "request"), covered(r))
		default:
			fmt.Fprintf(w, "ok   %s -> %s: %s in %s, %s, %s%s%s\n",
				r.Stream, r.Table, textfmt.Plural(r.Rows, "row"), textfmt.Plural(int64(r.Batches), "batch"), textfmt.Plural(r.Requests, "request"), r.Duration.Round(time.Millisecond), covered(r), reconciled(r))
		}
	}
	line := fmt.Sprintf("%s, %d failed", streamsCount(results), Failed(results, signalled))
	if signalled {
		line += fmt.Sprintf(", %d interrupted", stopped)
	}
	fmt.Fprintf(w, "%s, %s, %s\n", line, textfmt.Plural(rows, "row"), took.Round(time.Millisecond))
	if signalled {
		fmt.Fprintln(w, "INTERRUPTED: the pass was stopped by a signal; what it committed stays committed")
	}
}

// EmptyShard is the line of a pass of a shard no account hashes to:
// nothing to do, which is a success.
func EmptyShard(shard fmt.Stringer) string {
	return fmt.Sprintf("shard %s: no account hashes to this shard; nothing to do", shard)
}

// streamName is how a result is named in a pass's lines: the stream, or,
// for a source that failed before any of its streams ran, what failed.
func streamName(r poller.Result) string {
	if r.Stream == "" {
		if r.Account != "" && r.Account != config.DefaultAccount {
			return r.Source + " of account " + r.Account + " (listing its forms)"
		}
		return r.Source + " (listing the account's forms)"
	}
	return r.Stream
}

// streamsCount names what a pass synced for what it is: "3 forms",
// "3 forms and scheduling/bookings"; a source that failed before its
// streams ran is counted among the failures, not as a stream.
func streamsCount(results []poller.Result) string {
	var forms int64
	var others []string
	for _, r := range results {
		switch {
		case r.Stream == "":
		case r.Source == poller.SourceForms || r.Source == "":
			forms++
		default:
			others = append(others, r.Stream)
		}
	}
	if len(others) == 0 {
		return textfmt.Plural(forms, "form")
	}
	return textfmt.Plural(forms, "form") + " and " + strings.Join(others, ", ")
}

// reconciled is what a reconcile in the pass found, or "".
func reconciled(r poller.Result) string {
	if !r.Reconciled {
		return ""
	}
	return fmt.Sprintf("; reconciled %s: %s, %s", textfmt.Plural(r.ReconciledWindows, "window"), textfmt.Plural(r.Versions, "new version"), textfmt.Plural(r.Tombstones, "tombstone"))
}

func covered(r poller.Result) string {
	if r.CoveredEnd.IsZero() {
		return ""
	}
	return fmt.Sprintf(", synced up to %s", r.CoveredEnd.Format(time.RFC3339))
}
