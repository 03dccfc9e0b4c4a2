package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/suggest"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// UnknownStreamError is a form (a stream key) the state does not hold,
// with the keys it holds, the closest of which it names.
type UnknownStreamError struct {
	Key   string
	Known []string
}

func (e *UnknownStreamError) Error() string {
	msg := fmt.Sprintf("the state holds no form %s", e.Key)
	if p := suggest.Phrase(e.Key, e.Known); p != "" {
		msg += " (" + p + ")"
	}
	return msg + ": `syncd state show` lists the forms it holds; nothing was changed"
}

// FindStream is the state of key among list, or an *UnknownStreamError
// naming the keys the state holds that are closest to it.
func FindStream(list []state.StreamState, key string) (state.StreamState, error) {
	known := make([]string, 0, len(list))
	for _, st := range list {
		if st.Key == key {
			return st, nil
		}
		known = append(known, st.Key)
	}
	return state.StreamState{}, &UnknownStreamError{Key: key, Known: known}
}

// FindView is the view of key among forms (a state view's), or an
// *UnknownStreamError naming the closest keys the state holds.
func FindView(forms []status.Form, key string) (status.Form, error) {
	list := make([]state.StreamState, 0, len(forms))
	for _, f := range forms {
		list = append(list, state.StreamState{Key: f.Stream})
	}
	if _, err := FindStream(list, key); err != nil {
		return status.Form{}, err
	}
	for _, f := range forms {
		if f.Stream == key {
			return f, nil
		}
	}
	return status.Form{}, nil
}

// ResetRefusedError is a reset of a stream refused before anything
// changed: a stream the state does not hold, a date from which nothing is
// committed, or rows the next pass would write a second time.
type ResetRefusedError struct{ Err error }

func (e *ResetRefusedError) Error() string { return e.Err.Error() }
func (e *ResetRefusedError) Unwrap() error { return e.Err }

// CheckReset checks a reset of the stream key from instant from on (zero:
// all of it) before anything changes: the state must hold the stream,
// something must be committed from then on and, unless keepOutput, the
// output must hold no batch whose rows the next pass would write a second
// time. A refusal is a *ResetRefusedError; another error is a failure to
// read the state or the output.
func (a *App) CheckReset(ctx context.Context, key string, from time.Time, keepOutput bool) error {
	list, err := a.Store.List(ctx)
	if err != nil {
		return err
	}
	st, err := FindStream(list, key)
	if err != nil {
		return &ResetRefusedError{Err: err}
	}
	// Nothing is committed past now - sync.safety_lag (unless an older
	// syncd damaged the state, which a --from there repairs): a --from
	// beyond it and beyond the windows would reset nothing.
	horizon := time.Now().Add(-a.Cfg.Sync.SafetyLag.D())
	if !from.IsZero() && !from.Before(horizon) && !from.Before(st.Committed.End()) {
		return &ResetRefusedError{Err: fmt.Errorf("--from %s is not before now - sync.safety_lag (%s): nothing of form %s is committed from then on, so there is nothing to reset; give an earlier date; nothing was changed",
			from.Format(time.RFC3339), horizon.UTC().Format(time.RFC3339), key)}
	}
	if !from.IsZero() && !keepOutput {
		return a.refuseDuplicates(ctx, key, from)
	}
	return nil
}

// refuseDuplicates refuses a reset of the stream key from instant from
// while its output holds batches whose windows end after from: the next
// pass would fetch those rows again and write them beside the ones in
// place. It names the batches and the way out.
func (a *App) refuseDuplicates(ctx context.Context, key string, from time.Time) error {
	_, id := tablepkg.SplitStreamKey(key)
	table, after, cut, err := a.HeldAfter(ctx, key, from)
	if err != nil {
		return fmt.Errorf("read which batches table %s holds, to tell whether the reset would write rows twice: %w; nothing was changed", table, err)
	}
	if len(after) == 0 {
		return nil
	}
	ids := make([]string, 0, len(after))
	for _, h := range after {
		ids = append(ids, h.ID)
	}
	example := strings.Join(ids[:min(3, len(ids))], ", ")
	if len(ids) > 3 {
		example += ", ..."
	}
	batches := fmt.Sprintf("%d batches", len(after))
	if len(after) == 1 {
		batches = "1 batch"
	}
	return &ResetRefusedError{Err: fmt.Errorf("the output holds %s of form %s in table %s with rows from %s on (%s), which the next pass would fetch and write a second time: "+
		"use `syncd reconcile --form %s --from %s` to write only what changed, or `syncd refresh --form %s` to replace the table; "+
		"or remove those batches from the output yourself (Parquet: their <batch id>.parquet files) and reset --from %s, where the first of them starts; or pass --keep-output to have the rows twice; nothing was changed",
		batches, key, table, from.Format(time.RFC3339), example, id, from.Format("2006-01-02"), id, cut.UTC().Format(time.RFC3339Nano))}
}

// ResetStream forgets the committed windows of the stream key: all of
// them (from zero), or those from instant from on.
func (a *App) ResetStream(ctx context.Context, key string, from time.Time) error {
	if from.IsZero() {
		return a.Store.Reset(ctx, key)
	}
	return a.Store.Uncommit(ctx, key, from)
}
