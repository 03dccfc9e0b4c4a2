package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
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

// StoreSchedulingSignIn stores the scheduling API tokens of the account
// named name durably, and makes its running token source start from them:
// the next pass uses the new sign-in.
func (a *App) StoreSchedulingSignIn(ctx context.Context, name string, tok oauth.Token) error {
	acct := a.Account(name)
	if acct == nil {
		return &NotOpenError{Account: name, Shared: a.Cfg.State.Shared}
	}
	if acct.Scheduling == nil {
		return fmt.Errorf("account %s is no longer configured to sign in to the scheduling API", name)
	}
	// Through the running token source: a refresh of the old sign-in in
	// flight cannot save over the new one, and the next pass starts from it.
	return acct.Scheduling.Tokens.Replace(ctx, StateTokens{Store: a.Store, Namespace: acct.Cfg.Namespace()}.Saver(tok))
}

// StoreFormsSignIn stores the Forms API sign-in of the account named name;
// its next pass reads it (formsSignIn).
func (a *App) StoreFormsSignIn(ctx context.Context, name string, tok formsauth.Token) error {
	acct := a.Account(name)
	if acct == nil {
		return &NotOpenError{Account: name, Shared: a.Cfg.State.Shared}
	}
	if !acct.Cfg.FormsOAuth {
		return fmt.Errorf("account %s is no longer configured to sign in to the Forms API (forms_oauth)", name)
	}
	if err := (FormsTokens{Store: a.Store, Namespace: acct.Cfg.Namespace()}).Save(ctx, tok); err != nil {
		return err
	}
	acct.Log.Info("the account's Forms API sign-in was stored on request of `syncd auth login`")
	return nil
}

// ForgetSignIn forgets the sign-in of the account named name (source:
// "scheduling" or "forms") through the daemon's open store: the account's
// next pass of that source fails, naming `syncd auth login`.
func (a *App) ForgetSignIn(ctx context.Context, name, source string) error {
	acct := a.Account(name)
	if acct == nil {
		return &NotOpenError{Account: name, Shared: a.Cfg.State.Shared}
	}
	ns := acct.Cfg.Namespace()
	switch source {
	case "scheduling":
		tokens := StateTokens{Store: a.Store, Namespace: ns}
		if acct.Scheduling == nil {
			if err := tokens.Delete(ctx); err != nil {
				return err
			}
			break
		}
		// Through the running token source: a refresh in flight cannot
		// save its rotated pair after the logout, and the cached access
		// token goes too.
		if err := acct.Scheduling.Tokens.Replace(ctx, tokens.Delete); err != nil {
			return err
		}
	case "forms":
		if err := (FormsTokens{Store: a.Store, Namespace: ns}).Delete(ctx); err != nil {
			return err
		}
	default:
		return fmt.Errorf("source %q: use scheduling or forms", source)
	}
	acct.Log.Info("the account's sign-in was forgotten on request of `syncd auth logout`", zap.String(logkey.Source, source))
	return nil
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
