// Package status is the view of the state that `syncd state show -o json`
// prints and a running daemon serves at GET /status: one contract, read by
// the commands that ask a daemon instead of opening its state. Its field
// names are part of syncd's interface (README, "Machine-readable output").
package status

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
)

// View is what `syncd state show -o json` prints and what a running
// daemon serves at GET /status: every form's state. Its field names are
// part of syncd's interface (README, "Machine-readable output").
type View struct {
	State  string `json:"state"`  // where the state lives: a file or a gs:// URL
	Source string `json:"source"` // "store" (read directly) or "daemon" (from a running syncd's /status)
	Forms  []Form `json:"forms"`
	// Accounts summarizes each configured account (only /status?accounts=1
	// and `syncd accounts` carry it).
	Accounts []Account `json:"accounts,omitempty"`
	// Webhooks are the webhooks `syncd run` registered (only
	// /status?webhooks=1 and `syncd webhooks` carry them).
	Webhooks []Webhook `json:"webhooks,omitempty"`
}

// Webhook is one webhook syncd registered, as `syncd webhooks` lists it:
// never its URL (a forms URL holds its path token).
type Webhook struct {
	Account    string    `json:"account"`
	Source     string    `json:"source"` // forms, scheduling
	Stream     string    `json:"stream"` // a form id, or bookings
	ID         string    `json:"id"`     // the service's webhook id
	Registered time.Time `json:"registered"`
}

// Account is one account as `syncd accounts` shows it.
type Account struct {
	Name     string `json:"account"`
	Forms    int    `json:"forms"`    // form streams the state has of it
	Bookings bool   `json:"bookings"` // its bookings stream is in the state
	// SignIn is its scheduling sign-in; null when it does not sign in.
	SignIn      *SignIn    `json:"sign_in"`
	Rows        int64      `json:"rows"`
	LastSuccess *time.Time `json:"last_success"` // the latest successful pass of any of its streams; null: never
	// LagSeconds is how far behind now its least recent stream is
	// committed; null when nothing is committed yet.
	LagSeconds *float64 `json:"lag_seconds"`
	Failing    int      `json:"failing_streams"` // streams whose last pass failed
	LastError  string   `json:"last_error"`      // one of them, with its stream
	// NotConfigured are the streams of the account the state holds and the
	// configuration no longer names (a form removed from forms[], a
	// mistyped id since fixed): not synced, never counted as failing, and
	// not in the counts above; `syncd state forget` removes their records.
	NotConfigured []string `json:"not_configured_streams"`
}

// SignIn is an account's sign-in to the scheduling API, never its tokens.
type SignIn struct {
	SignedIn bool       `json:"signed_in"`
	User     string     `json:"user"`
	Scopes   []string   `json:"scopes"`
	Expiry   *time.Time `json:"access_token_expiry"` // renewed by the refresh token; null when not signed in
	Error    string     `json:"error"`               // why the stored sign-in could not be read
}

// Accounts groups the streams of v by account. names are the configured
// accounts in order; namespace maps a name to its namespace (the default
// account's is ""); split splits a stream key into namespace and key.
func Accounts(v View, names []string, namespace func(string) string, split func(string) (string, string), signIns map[string]*SignIn, now time.Time) []Account {
	byNS := map[string]*Account{}
	out := make([]Account, len(names))
	for i, n := range names {
		out[i] = Account{Name: n, SignIn: signIns[n]}
		byNS[namespace(n)] = &out[i]
	}
	var oldest = map[*Account]time.Time{}
	for _, f := range v.Forms {
		ns, key := split(f.Stream)
		a := byNS[ns]
		if a == nil {
			continue // an account removed from the configuration: its state stays
		}
		if f.NotConfigured {
			a.NotConfigured = append(a.NotConfigured, f.Stream)
			continue
		}
		if strings.Contains(key, "/") {
			a.Bookings = true
		} else {
			a.Forms++
		}
		a.Rows += f.Rows
		if f.LastSuccess != nil && (a.LastSuccess == nil || f.LastSuccess.After(*a.LastSuccess)) {
			a.LastSuccess = f.LastSuccess
		}
		if f.LastError != "" {
			a.Failing++
			a.LastError = key + ": " + f.LastError
		}
		var end time.Time
		for _, w := range f.Committed {
			if w.End.After(end) {
				end = w.End
			}
		}
		if o, ok := oldest[a]; !end.IsZero() && (!ok || end.Before(o)) {
			oldest[a] = end
		}
	}
	for i := range out {
		if out[i].NotConfigured == nil {
			out[i].NotConfigured = []string{}
		}
	}
	for a, end := range oldest {
		lag := now.Sub(end).Seconds()
		a.LagSeconds = &lag
	}
	return out
}

type Form struct {
	Stream      string      `json:"form_id"`
	Rows        int64       `json:"rows"`
	Batches     int64       `json:"batches"`
	LastSuccess *time.Time  `json:"last_success"` // null: never
	UpdatedAt   *time.Time  `json:"updated_at"`
	Generation  int         `json:"generation"`
	Committed   []Window    `json:"committed"`
	OpenBatches []OpenBatch `json:"open_batches"`
	Refresh     *Refresh    `json:"refresh"` // null unless a refresh is under way
	LastError   string      `json:"last_error"`
	// FreshTo is where the stream's committed history ends: every record
	// before it is in the output (null: nothing committed yet);
	// FreshnessSeconds is how far behind now that is, when the view was
	// made. With webhooks it is the last triggered or scheduled pass's.
	FreshTo          *time.Time `json:"fresh_to"`
	FreshnessSeconds *float64   `json:"freshness_seconds"`
	// Damaged is set when the form's record in the state is damaged, or
	// its committed windows reach past now (see poller.FutureCommitError):
	// the sentence says how to repair it.
	Damaged string `json:"damaged"`
	// Reconcile is what the reconciles of the lookback did.
	Reconcile Reconcile `json:"reconcile"`
	// NotConfigured is set when the configuration no longer names the
	// stream (a form removed from forms[], a mistyped id since fixed, an
	// account removed): it is not synced, its last error is not a failure,
	// and `syncd state forget ID` removes its record.
	NotConfigured bool `json:"not_configured"`
	// PinnedSchema is the schema the output holds; only /status?schema=1
	// carries it (for `syncd schema` beside a running daemon).
	PinnedSchema json.RawMessage `json:"pinned_schema,omitempty"`
	// Layout is how the table's files are partitioned (none, year, month,
	// day), as the state records it; "" while a new table has chosen none,
	// or for a table written before layouts were recorded (its next pass
	// records the one its files have).
	Layout string `json:"layout"`
}

type Window struct {
	Start time.Time `json:"start"` // 1970-01-01T00:00:00Z: the beginning of the form's history
	End   time.Time `json:"end"`
}

type OpenBatch struct {
	BatchID   string    `json:"batch_id"`
	Table     string    `json:"table"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	CreatedAt time.Time `json:"created_at"`
}

type Reconcile struct {
	Last        *time.Time `json:"last"`         // end of the last reconcile pass; null: never
	IndexedFrom *time.Time `json:"indexed_from"` // the version index reaches back to here; null: none
	Indexed     int64      `json:"indexed"`      // rows in the version index (counted by each commit: reading it costs nothing)
	Windows     int64      `json:"windows"`      // committed windows read again
	Versions    int64      `json:"versions"`     // new versions and late imports written
	Tombstones  int64      `json:"tombstones"`   // deletions written
}

type Refresh struct {
	Table       string    `json:"table"`
	RequestedAt time.Time `json:"requested_at"`
}

// TimePtr is t as JSON shows a time that may be none: nil (null) when t
// is zero.
func TimePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// Of is the view of the forms' states at instant now.
func Of(where string, list []state.StreamState, now time.Time, withSchema bool) View {
	v := View{State: where, Source: "store", Forms: make([]Form, 0, len(list))}
	for _, st := range list {
		f := Form{
			Stream: st.Key, Rows: st.Rows, Batches: st.Batches, LastSuccess: TimePtr(st.LastSuccess),
			UpdatedAt: TimePtr(st.UpdatedAt), Generation: st.Generation, LastError: st.LastError, Layout: st.Layout,
			Committed: make([]Window, 0, len(st.Committed)), OpenBatches: make([]OpenBatch, 0, len(st.Intents)),
		}
		for _, iv := range st.Committed {
			f.Committed = append(f.Committed, Window{Start: iv.Start.UTC(), End: iv.End.UTC()})
		}
		for id, in := range st.Intents {
			f.OpenBatches = append(f.OpenBatches, OpenBatch{BatchID: id, Table: in.Table, Start: in.Start.UTC(), End: in.End.UTC(), CreatedAt: in.CreatedAt.UTC()})
		}
		sort.Slice(f.OpenBatches, func(i, j int) bool { return f.OpenBatches[i].BatchID < f.OpenBatches[j].BatchID })
		if st.Refresh != nil {
			f.Refresh = &Refresh{Table: st.Refresh.Table, RequestedAt: st.Refresh.RequestedAt.UTC()}
		}
		f.Reconcile = Reconcile{Last: TimePtr(st.Reconciled), IndexedFrom: TimePtr(st.IndexedFrom), Indexed: st.Indexed,
			Windows: st.ReconciledWindows, Versions: st.VersionsWritten, Tombstones: st.Tombstones}
		if end := st.Committed.End(); !end.IsZero() {
			f.FreshTo = TimePtr(end)
			lag := now.Sub(end).Seconds()
			f.FreshnessSeconds = &lag
		}
		if end := st.Committed.End(); end.After(now) {
			f.Damaged = (&poller.FutureCommitError{Stream: st.Key, End: end, LastSuccess: st.LastSuccess}).Error()
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

// Vacant reports whether the view of a stream holds nothing: no row, no
// window, no batch, no error, no success, no index (a stream reset or
// forgotten, before any pass since).
func (f Form) Vacant() bool {
	return f.Rows == 0 && f.Batches == 0 && len(f.Committed) == 0 && len(f.OpenBatches) == 0 && f.Refresh == nil &&
		f.LastError == "" && f.LastSuccess == nil && f.Damaged == "" && f.Reconcile.Indexed == 0 && f.Reconcile.IndexedFrom == nil
}

// MarkConfigured sets NotConfigured on the forms configured says the
// configuration no longer names, and drops those of them that are vacant:
// streams `syncd state forget` forgot.
func (v *View) MarkConfigured(configured func(key string) bool) {
	if configured == nil {
		return
	}
	kept := v.Forms[:0]
	for _, f := range v.Forms {
		f.NotConfigured = !configured(f.Stream)
		if f.NotConfigured && f.Vacant() {
			continue
		}
		kept = append(kept, f)
	}
	v.Forms = kept
}

// FromStart corrects FreshTo (and FreshnessSeconds) for the streams whose
// start start tells (ok false: unknown): FreshTo is where the committed
// history that begins at the stream's start ends, and null when nothing
// from the start on is committed yet (a backfill of a later range alone),
// so that it never reads as complete while an earlier range was never
// synced.
func (v *View) FromStart(start func(key string) (time.Time, bool), now time.Time) {
	if start == nil {
		return
	}
	for i := range v.Forms {
		f := &v.Forms[i]
		from, ok := start(f.Stream)
		if !ok || len(f.Committed) == 0 {
			continue
		}
		first := f.Committed[0]
		if first.Start.After(from) {
			f.FreshTo, f.FreshnessSeconds = nil, nil
			continue
		}
		end := first.End
		f.FreshTo = TimePtr(end)
		lag := now.Sub(end).Seconds()
		f.FreshnessSeconds = &lag
	}
}

// Handler serves GET /status: the state view of the daemon's own
// store, read in a read transaction beside its writes. ?form=ID narrows it
// to one form, ?schema=1 adds the pinned schemas.
//
// configured, when not nil, tells the streams the configuration names
// (View.MarkConfigured); accounts, when not nil, adds the accounts'
// summary for ?accounts=1, and webhooks, when not nil, the registered
// webhooks for ?webhooks=1.
func Handler(where string, store state.Store, configured func() func(key string) bool, start func() func(key string) (time.Time, bool), accounts func(ctx context.Context, v View) []Account, webhooks func(ctx context.Context) ([]Webhook, error)) http.HandlerFunc {
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
				if st.Key == id {
					kept = append(kept, st)
				}
			}
			list = kept
		}
		v := Of(where, list, time.Now(), r.URL.Query().Get("schema") == "1")
		if configured != nil {
			v.MarkConfigured(configured())
		}
		if start != nil {
			v.FromStart(start(), time.Now())
		}
		if accounts != nil && r.URL.Query().Get("accounts") == "1" {
			v.Accounts = accounts(ctx, v)
		}
		if webhooks != nil && r.URL.Query().Get("webhooks") == "1" {
			if v.Webhooks, err = webhooks(ctx); err != nil {
				http.Error(w, "read the webhooks: "+err.Error(), http.StatusInternalServerError)
				return
			}
			if v.Webhooks == nil {
				v.Webhooks = []Webhook{}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}
