package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/control"
	tablepkg "github.com/syncd-dev/syncd/internal/table"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
)

// The view of the state that `state show -o json` prints and a daemon
// serves at /status is internal/status's: these are its names here.
type (
	stateView     = status.View
	formView      = status.Form
	windowView    = status.Window
	openBatchView = status.OpenBatch
	reconcileView = status.Reconcile
	refreshView   = status.Refresh
)

// viewOf is status.Of.
func viewOf(where string, list []state.StreamState, now time.Time, withSchema bool) stateView {
	return status.Of(where, list, now, withSchema)
}

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

// statusHandler serves GET /status (status.Handler).
func statusHandler(cfg *config.Config, store state.Store) http.HandlerFunc {
	current := func() *config.Config { return cfg }
	return status.Handler(app.StateWhere(cfg), store, func() func(string) bool { return app.StreamConfigured(cfg) }, func() func(string) (time.Time, bool) { return app.StreamStart(cfg) }, app.AccountsView(current, store), app.WebhooksView(current, store))
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

// readState is the state view: read directly (read-only) when no syncd
// holds the state, and from the running daemon's /status when one does.
// query is added to the /status request ("?schema=1").
func readState(ctx context.Context, cfg *config.Config, query string) (stateView, error) {
	st, err := app.OpenStore(ctx, cfg, true)
	if err == nil {
		defer st.Close()
		list, err := st.List(ctx)
		if err != nil {
			return stateView{}, withCode(exitFailed, fmt.Errorf("read the state %s: %w", app.StateWhere(cfg), err))
		}
		v := viewOf(app.StateWhere(cfg), list, time.Now(), strings.Contains(query, "schema=1"))
		v.MarkConfigured(app.StreamConfigured(cfg))
		v.FromStart(app.StreamStart(cfg), time.Now())
		if strings.Contains(query, "accounts=1") {
			v.Accounts = app.AccountsView(func() *config.Config { return cfg }, st)(ctx, v)
		}
		if strings.Contains(query, "webhooks=1") {
			if v.Webhooks, err = app.WebhooksView(func() *config.Config { return cfg }, st)(ctx); err != nil {
				return stateView{}, withCode(exitState, err)
			}
		}
		return v, nil
	}
	var le *state.LockedError
	if !errors.As(err, &le) || le.Foreign {
		return stateView{}, withCode(exitState, err)
	}
	v, aerr := status.Ask(ctx, cfg.Server.Addr, query)
	if aerr != nil {
		if notDaemon(cfg, le) {
			// A `syncd once`, backfill or other command holds the state: no
			// daemon serves its status, and server.addr is beside the point.
			return stateView{}, withCode(exitState, fmt.Errorf("state %s is in use by a syncd that is not a daemon (%s): a `syncd once`, `backfill` or another command writing it, which serves no /status; let it finish (or stop it) and run this again",
				le.Path, le.Holder))
		}
		return stateView{}, withCode(exitState, fmt.Errorf("%w; and its status could not be read either: %v (is server.addr in this config the daemon's?)", err, aerr))
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

// notDaemon reports whether the process that holds the state (held names
// it) runs on this host and is no `syncd run`: a daemon writes a control
// file beside the state, with its pid.
func notDaemon(cfg *config.Config, held *state.LockedError) bool {
	if held.Holder == nil || held.Holder.PID == 0 {
		return false
	}
	if host, err := os.Hostname(); err != nil || host != held.Holder.Host {
		return false
	}
	ci, err := control.Read(cfg)
	return errors.Is(err, os.ErrNotExist) || err == nil && ci.PID != held.Holder.PID
}
