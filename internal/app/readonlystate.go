package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

// readOnlyState is the state a source opened to read only reads its
// sign-in from (source.ReadOnly): each read opens the configured state
// read-only and closes it again, so that nothing holds it between reads
// (a syncd may start meanwhile), and a command whose sources read nothing
// there never opens it. A state that cannot be opened fails the read
// with a *source.UnreadableStateError; every write is refused.
type readOnlyState struct{ cfg *config.Config }

var _ state.Store = readOnlyState{}

// read opens the state, runs fn on it and closes it.
func (s readOnlyState) read(ctx context.Context, fn func(state.Store) error) error {
	store, err := OpenStore(ctx, s.cfg, true)
	if err != nil {
		return &source.UnreadableStateError{Err: err}
	}
	err = fn(store)
	if cerr := store.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close the state: %w", cerr)
	}
	return err
}

func (s readOnlyState) GetSecret(ctx context.Context, name string) (v []byte, err error) {
	err = s.read(ctx, func(st state.Store) error { v, err = st.GetSecret(ctx, name); return err })
	return v, err
}

func (s readOnlyState) Get(ctx context.Context, key string) (v state.StreamState, err error) {
	err = s.read(ctx, func(st state.Store) error { v, err = st.Get(ctx, key); return err })
	return v, err
}

func (s readOnlyState) List(ctx context.Context) (v []state.StreamState, err error) {
	err = s.read(ctx, func(st state.Store) error { v, err = st.List(ctx); return err })
	return v, err
}

func (s readOnlyState) Versions(ctx context.Context, key string, from, to time.Time, fn func(state.Entry) error) error {
	return s.read(ctx, func(st state.Store) error { return st.Versions(ctx, key, from, to, fn) })
}

func (readOnlyState) RecordIntent(context.Context, string, state.Intent) error {
	return state.ErrReadOnly
}
func (readOnlyState) Commit(context.Context, string, state.Commit) error { return state.ErrReadOnly }
func (readOnlyState) DropIntent(context.Context, string, string) error   { return state.ErrReadOnly }
func (readOnlyState) SetSchema(context.Context, string, json.RawMessage) error {
	return state.ErrReadOnly
}
func (readOnlyState) SetError(context.Context, string, string) error        { return state.ErrReadOnly }
func (readOnlyState) SetSucceeded(context.Context, string, time.Time) error { return state.ErrReadOnly }
func (readOnlyState) Reset(context.Context, string) error                   { return state.ErrReadOnly }
func (readOnlyState) Uncommit(context.Context, string, time.Time) error     { return state.ErrReadOnly }
func (readOnlyState) BeginRefresh(context.Context, string, state.Refresh) error {
	return state.ErrReadOnly
}
func (readOnlyState) FinishRefresh(context.Context, string) error { return state.ErrReadOnly }
func (readOnlyState) SetReconciled(context.Context, string, time.Time) error {
	return state.ErrReadOnly
}
func (readOnlyState) PutSecret(context.Context, string, []byte) error { return state.ErrReadOnly }

// Close has nothing to close: no read leaves the state open.
func (readOnlyState) Close() error { return nil }
