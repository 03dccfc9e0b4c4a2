package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/source"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/poller"
)

// What a running `syncd run` does on request of a command beside it
// (through its control endpoint): the same work as the command alone,
// through the daemon's own open store and engine.

// OpenAccounts are the accounts open now (a reload, or on a shared state
// the coordinator, changes them).
func (a *App) OpenAccounts() []*Account {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return append([]*Account(nil), a.Accounts...)
}

// ForEach runs f for every account of accounts at once, each in its own
// goroutine (accounts wait on their own keys' rate limits), and gathers
// the results in the accounts' order.
func ForEach(accounts []*Account, f func(*Account) []poller.Result) []poller.Result {
	out := make([][]poller.Result, len(accounts))
	var wg sync.WaitGroup
	for i, acct := range accounts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = f(acct)
		}()
	}
	wg.Wait()
	var results []poller.Result
	for _, r := range out {
		results = append(results, r...)
	}
	return results
}

// NotOpenError is an account this process does not sync: not configured,
// or on a shared state (state.shared) synced by another replica.
type NotOpenError struct {
	Account string
	Shared  bool
}

func (e *NotOpenError) Error() string {
	if e.Shared {
		return fmt.Sprintf("account %s is not synced by this replica (state.shared): run the command in the pod of the replica whose /readyz lists it", e.Account)
	}
	return fmt.Sprintf("account %s is not one of the accounts this syncd runs: check --account against the config's accounts", e.Account)
}

// StoreSignIn stores the sign-in to the source named src of the account
// named name (token: what `syncd auth login` obtained, as JSON) through
// the daemon's open store; a running token source of the account starts
// from it, and the next pass uses it.
func (a *App) StoreSignIn(ctx context.Context, name, src string, token json.RawMessage) error {
	acct := a.Account(name)
	if acct == nil {
		return &NotOpenError{Account: name, Shared: a.Cfg.State.Shared}
	}
	l, err := LoginSource(src)
	if err != nil {
		return err
	}
	save := func(ctx context.Context) error { return l.SaveSignIn(ctx, a.Store, acct.Cfg, token) }
	if err := acct.replaceSignIn(ctx, src, save); err != nil {
		return err
	}
	acct.Log.Info("the account's sign-in was stored on request of `syncd auth login`", zap.String(logkey.Source, src))
	return nil
}

// ForgetSignIn forgets the sign-in to the source named src of the account
// named name through the daemon's open store: the account's next pass of
// that source fails, naming `syncd auth login`.
func (a *App) ForgetSignIn(ctx context.Context, name, src string) error {
	acct := a.Account(name)
	if acct == nil {
		return &NotOpenError{Account: name, Shared: a.Cfg.State.Shared}
	}
	l, err := LoginSource(src)
	if err != nil {
		return err
	}
	ns := acct.Cfg.Namespace()
	if err := acct.replaceSignIn(ctx, src, func(ctx context.Context) error { return l.DeleteSignIn(ctx, a.Store, ns) }); err != nil {
		return err
	}
	acct.Log.Info("the account's sign-in was forgotten on request of `syncd auth logout`", zap.String(logkey.Source, src))
	return nil
}

// replaceSignIn runs write, which saves or deletes the stored sign-in to
// the source named src, through the account's running token source when
// it has one (source.LiveSignIn): a refresh in flight cannot save its
// rotated pair over it, and the cached access token goes too.
func (acct *Account) replaceSignIn(ctx context.Context, src string, write func(context.Context) error) error {
	if live, ok := acct.sourceAccount(src).(source.LiveSignIn); ok {
		return live.ReplaceSignIn(ctx, write)
	}
	return write(ctx)
}

// busyRetry is how often a backfill beside the daemon's own pass of the
// same stream asks again whether that pass has ended.
const busyRetry = 200 * time.Millisecond

// BackfillWaiting is Poller.Backfill that, while another pass of the stream
// holds the stream's lock (the daemon's scheduled pass), waits for it to
// end instead of failing with poller.ErrBusy: a backfill beside the daemon
// never runs a window its scheduled pass runs at the same time. onBusy, if
// set, is told once that it waits.
func BackfillWaiting(ctx context.Context, p *poller.Poller, s poller.Stream, from, to time.Time, concurrency int, progress func(poller.Progress), onBusy func(stream string)) poller.Result {
	told := false
	for {
		r := p.Backfill(ctx, s, from, to, concurrency, progress)
		if !errors.Is(r.Err, poller.ErrBusy) {
			return r
		}
		if !told && onBusy != nil {
			onBusy(s.Key())
			told = true
		}
		select {
		case <-ctx.Done():
			r.Err, r.Interrupted = nil, true
			return r
		case <-time.After(busyRetry):
		}
	}
}

// logSignIn notes a sign-in stored on request.
func logSignIn(acct *Account, how, user string) {
	acct.Log.Info("the account's user signed in "+how, zap.String(logkey.User, user))
}
