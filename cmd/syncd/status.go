package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
)

// stateView is what `syncd state show -o json` prints and what a running
// daemon serves at GET /status: every form's state. Its field names are
// part of syncd's interface (README, "Machine-readable output").
type stateView struct {
	State  string     `json:"state"`  // where the state lives: a file or a gs:// URL
	Source string     `json:"source"` // "store" (read directly) or "daemon" (from a running syncd's /status)
	Forms  []formView `json:"forms"`
}

type formView struct {
	FormID      string          `json:"form_id"`
	Rows        int64           `json:"rows"`
	Batches     int64           `json:"batches"`
	LastSuccess *time.Time      `json:"last_success"` // null: never
	UpdatedAt   *time.Time      `json:"updated_at"`
	Generation  int             `json:"generation"`
	Committed   []windowView    `json:"committed"`
	OpenBatches []openBatchView `json:"open_batches"`
	Refresh     *refreshView    `json:"refresh"` // null unless a refresh is under way
	LastError   string          `json:"last_error"`
	// Damaged is set when the form's record in the state is damaged, or
	// its committed windows reach past now (see poller.FutureCommitError):
	// the sentence says how to repair it.
	Damaged string `json:"damaged"`
	// Reconcile is what the reconciles of the lookback did.
	Reconcile reconcileView `json:"reconcile"`
	// PinnedSchema is the schema the output holds; only /status?schema=1
	// carries it (for `syncd schema` beside a running daemon).
	PinnedSchema json.RawMessage `json:"pinned_schema,omitempty"`
}

type windowView struct {
	Start time.Time `json:"start"` // 1970-01-01T00:00:00Z: the beginning of the form's history
	End   time.Time `json:"end"`
}

type openBatchView struct {
	BatchID   string    `json:"batch_id"`
	Table     string    `json:"table"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	CreatedAt time.Time `json:"created_at"`
}

type reconcileView struct {
	Last        *time.Time `json:"last"`         // end of the last reconcile pass; null: never
	IndexedFrom *time.Time `json:"indexed_from"` // the version index reaches back to here; null: none
	Indexed     int64      `json:"indexed"`      // rows in the version index (counted by each commit: reading it costs nothing)
	Windows     int64      `json:"windows"`      // committed windows read again
	Versions    int64      `json:"versions"`     // new versions and late imports written
	Tombstones  int64      `json:"tombstones"`   // deletions written
}

type refreshView struct {
	Table       string    `json:"table"`
	RequestedAt time.Time `json:"requested_at"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// viewOf is the view of the forms' states at instant now.
func viewOf(where string, list []state.FormState, now time.Time, withSchema bool) stateView {
	v := stateView{State: where, Source: "store", Forms: make([]formView, 0, len(list))}
	for _, st := range list {
		f := formView{
			FormID: st.FormID, Rows: st.Rows, Batches: st.Batches, LastSuccess: timePtr(st.LastSuccess),
			UpdatedAt: timePtr(st.UpdatedAt), Generation: st.Generation, LastError: st.LastError,
			Committed: make([]windowView, 0, len(st.Committed)), OpenBatches: make([]openBatchView, 0, len(st.Intents)),
		}
		for _, iv := range st.Committed {
			f.Committed = append(f.Committed, windowView{Start: iv.Start.UTC(), End: iv.End.UTC()})
		}
		for id, in := range st.Intents {
			f.OpenBatches = append(f.OpenBatches, openBatchView{BatchID: id, Table: in.Table, Start: in.Start.UTC(), End: in.End.UTC(), CreatedAt: in.CreatedAt.UTC()})
		}
		sort.Slice(f.OpenBatches, func(i, j int) bool { return f.OpenBatches[i].BatchID < f.OpenBatches[j].BatchID })
		if st.Refresh != nil {
			f.Refresh = &refreshView{Table: st.Refresh.Table, RequestedAt: st.Refresh.RequestedAt.UTC()}
		}
		f.Reconcile = reconcileView{Last: timePtr(st.Reconciled), IndexedFrom: timePtr(st.IndexedFrom), Indexed: st.Indexed,
			Windows: st.ReconciledWindows, Versions: st.VersionsWritten, Tombstones: st.Tombstones}
		if end := st.Committed.End(); end.After(now) {
			f.Damaged = (&poller.FutureCommitError{FormID: st.FormID, End: end, LastSuccess: st.LastSuccess}).Error()
		}
		if st.Damaged != "" {
			f.Damaged = st.Damaged
		}
		if withSchema && len(st.Schema) > 0 {
			f.PinnedSchema = st.Schema
		}
		v.Forms = append(v.Forms, f)
	}
	return v
}

// printStateTable writes the view for a person.
func printStateTable(w io.Writer, v stateView) {
	if v.Source == "daemon" {
		fmt.Fprintf(w, "(read from the running syncd's /status: %s is in use by it)\n", v.State)
	}
	for _, f := range v.Forms {
		fmt.Fprintf(w, "form %s: %s in %s", f.FormID, plural(f.Rows, "row"), plural(f.Batches, "batch"))
		if f.LastSuccess != nil {
			fmt.Fprintf(w, ", last success %s", f.LastSuccess.Format(time.RFC3339))
		}
		fmt.Fprintln(w)
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
				fmt.Fprintf(w, " from %s", rc.IndexedFrom.Format(time.RFC3339))
			}
			fmt.Fprintln(w)
		}
		if f.Damaged != "" {
			fmt.Fprintf(w, "  DAMAGED: %s\n", f.Damaged)
		}
		if f.LastError != "" {
			fmt.Fprintf(w, "  last error: %s\n", f.LastError)
		}
	}
	if len(v.Forms) == 0 {
		fmt.Fprintln(w, "no form has been synced yet")
	}
}

// statusHandler serves GET /status: the state view of the daemon's own
// store, read in a read transaction beside its writes. ?form=ID narrows it
// to one form, ?schema=1 adds the pinned schemas.
func statusHandler(cfg *config.Config, store state.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		list, err := store.List(ctx)
		if err != nil {
			http.Error(w, "read the state: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if id := r.URL.Query().Get("form"); id != "" {
			kept := list[:0]
			for _, st := range list {
				if st.FormID == id {
					kept = append(kept, st)
				}
			}
			list = kept
		}
		v := viewOf(app.StateWhere(cfg), list, time.Now(), r.URL.Query().Get("schema") == "1")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

// daemonURL is where a client on this host reaches the daemon's listener
// at addr: a wildcard host is asked on loopback.
func daemonURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("server.addr %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// statusTimeout bounds the wait for a running daemon's /status.
const statusTimeout = 5 * time.Second

// askDaemon reads the state view from the daemon listening at server.addr.
func askDaemon(ctx context.Context, cfg *config.Config, query string) (stateView, error) {
	u, err := daemonURL(cfg.Server.Addr, "/status"+query)
	if err != nil {
		return stateView{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return stateView{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return stateView{}, fmt.Errorf("ask the running syncd at %s (server.addr): %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return stateView{}, fmt.Errorf("ask the running syncd at %s (server.addr): %s: %s", u, resp.Status, b)
	}
	var v stateView
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return stateView{}, fmt.Errorf("read the answer of %s: %w", u, err)
	}
	v.Source = "daemon"
	return v, nil
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
		return viewOf(app.StateWhere(cfg), list, time.Now(), query != ""), nil
	}
	var le *state.LockedError
	if !errors.As(err, &le) || le.Foreign {
		return stateView{}, withCode(exitState, err)
	}
	v, aerr := askDaemon(ctx, cfg, query)
	if aerr != nil {
		return stateView{}, withCode(exitState, fmt.Errorf("%w; and its status could not be read either: %v (is server.addr in this config the daemon's?)", err, aerr))
	}
	return v, nil
}
