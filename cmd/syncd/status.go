package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/control"
	tablepkg "github.com/syncd-dev/syncd/internal/table"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/status"
)

// The view of the state that `state show -o json` prints and a daemon
// serves at /status is internal/status's: these are its names here.
type (
	stateView = status.View
	formView  = status.Form
)

// printStateTable writes the view for a person.
func printStateTable(w io.Writer, v stateView) {
	if v.Source == "daemon" {
		fmt.Fprintf(w, "(read from the running syncd's /status: %s is in use by it)\n", v.State)
	}
	for _, f := range v.Forms {
		kind := "form" // a form's key is its id; another source's stream is source/stream
		if _, key := tablepkg.SplitStreamKey(f.Stream); strings.Contains(key, "/") {
			kind = "stream"
		}
		fmt.Fprintf(w, "%s %s: %s in %s", kind, f.Stream, plural(f.Rows, "row"), plural(f.Batches, "batch"))
		if f.LastSuccess != nil {
			fmt.Fprintf(w, ", last success %s", f.LastSuccess.Format(time.RFC3339))
		}
		if f.FreshnessSeconds != nil {
			fmt.Fprintf(w, ", fresh to %s (%s ago)", fmtTime(*f.FreshTo), ageText(time.Duration(*f.FreshnessSeconds*float64(time.Second))))
		} else if len(f.Committed) > 0 && !f.NotConfigured {
			fmt.Fprintf(w, ", not complete: nothing committed from the form's start on (committed from %s; backfill the range before it)", fmtTime(f.Committed[0].Start))
		}
		fmt.Fprintln(w)
		if f.Layout != "" {
			fmt.Fprintf(w, "  files partitioned by %s\n", layoutWords(f.Layout))
		}
		for _, iv := range f.Committed {
			fmt.Fprintf(w, "  committed [%s, %s)\n", fmtTime(iv.Start), fmtTime(iv.End))
		}
		for _, in := range f.OpenBatches {
			fmt.Fprintf(w, "  open batch %s [%s, %s) since %s\n", in.BatchID, fmtTime(in.Start), fmtTime(in.End), in.CreatedAt.Format(time.RFC3339))
		}
		if f.Refresh != nil {
			fmt.Fprintf(w, "  refresh of table %s under way since %s: the next pass finishes it\n", f.Refresh.Table, f.Refresh.RequestedAt.Format(time.RFC3339))
		}
		if rc := f.Reconcile; rc.Last != nil || rc.IndexedFrom != nil {
			last := "never"
			if rc.Last != nil {
				last = rc.Last.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "  reconcile: last %s; %s read again, %s, %s written; %s indexed", last, plural(rc.Windows, "window"),
				plural(rc.Versions, "new version"), plural(rc.Tombstones, "tombstone"), plural(rc.Indexed, "row"))
			if rc.IndexedFrom != nil {
				if rc.IndexedFrom.Equal(time.Unix(0, 0)) {
					fmt.Fprint(w, " from the form's beginning")
				} else {
					fmt.Fprintf(w, " from %s", rc.IndexedFrom.Format(time.RFC3339))
				}
			}
			fmt.Fprintln(w)
		}
		if f.Damaged != "" {
			fmt.Fprintf(w, "  DAMAGED: %s\n", f.Damaged)
		}
		if f.LastError != "" {
			fmt.Fprintf(w, "  last error: %s\n", f.LastError)
		}
		if f.NotConfigured {
			fmt.Fprintf(w, "  no longer in the configuration: not synced; `syncd state forget %s` removes this record\n", f.Stream)
		}
	}
	if len(v.Forms) == 0 {
		fmt.Fprintln(w, "no form has been synced yet")
	}
}

// readAccountsView checks the output format and the --account names, then
// reads the state's view (query asks a running daemon's /status for more):
// the start of the commands that list something per account.
func (g *globals) readAccountsView(ctx context.Context, format, query string) (stateView, error) {
	if err := checkFormat(format); err != nil {
		return stateView{}, err
	}
	cfg, _, err := g.load()
	if err != nil {
		return stateView{}, err
	}
	if _, err := app.SelectAccounts(cfg, g.accounts); err != nil {
		return stateView{}, withCode(exitUsage, err)
	}
	return readState(ctx, cfg, query)
}

// readState is the state view (control.ReadState), with its exit code:
// 3 when the state could not be opened nor its daemon asked, 1 when it
// could not be read.
func readState(ctx context.Context, cfg *config.Config, query string) (stateView, error) {
	v, err := control.ReadState(ctx, cfg, query)
	var se *app.StateError
	if errors.As(err, &se) {
		return stateView{}, withCode(exitState, err)
	}
	if err != nil {
		return stateView{}, withCode(exitFailed, err)
	}
	return v, nil
}

// layoutWords says what a table's layout (sink.Layout) makes of its
// files, for a person.
func layoutWords(layout string) string {
	switch layout {
	case "none":
		return "nothing (layout none: files in the table's folder)"
	case "year", "month", "day":
		return layout + " (layout " + layout + ")"
	}
	return layout
}
