package control

// The sign-ins of `syncd auth`: checked, saved, read and forgotten in the
// state when it opens for writing, or by the running syncd that holds it,
// through its control endpoint. A failure to reach the state is an
// *app.StateError (the commands' exit 3).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
)

// saveWait bounds how long `auth login` waits for a pass that holds the
// state to finish, to save the tokens.
const saveWait = 2 * time.Minute

// InterruptedError is a wait for the state that ctx ended: nothing was
// saved.
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return e.Err.Error() }
func (e *InterruptedError) Unwrap() error { return e.Err }

// ProbeForLogin checks, before the person approves, that the sign-in can
// be saved: the state opens for writing, or the running syncd that holds
// it answers on its control endpoint (it will store the tokens); held is
// then what holds the state. Every error is the state's.
func ProbeForLogin(ctx context.Context, cfg *config.Config, namespace string) (held *state.LockedError, err error) {
	probe, err := app.OpenStoreOf(ctx, cfg, namespace)
	if held, ok := HeldByDaemon(err); ok {
		if _, cerr := Connect(ctx, cfg, held); cerr != nil {
			return nil, cerr
		}
		return held, nil
	}
	if err != nil {
		return nil, err
	}
	return nil, probe.Close()
}

// SaveSignIn stores the sign-in tok of acct (source: scheduling or forms;
// what: "tokens" or "token", as its source.LoginFlow says): with save, when the state opens for writing,
// or by the running syncd that holds it, through its control endpoint.
// While a pass without a control endpoint (`syncd once`) holds the state, it
// waits up to saveWait for it to end. how is "" or says that the daemon
// stored it. The person's consent is never dropped for a state that is
// merely busy. A state that stays out of reach is an *app.StateError, a
// wait ctx ended an *InterruptedError.
func SaveSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, tok any, save func(state.Store) error, login, what string) (how string, err error) {
	deadline := time.Now().Add(saveWait)
	for {
		store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
		if err == nil {
			defer store.Close()
			return "", save(store)
		}
		held, ok := HeldByDaemon(err)
		if !ok {
			return "", &app.StateError{Err: fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, err, login)}
		}
		c, cerr := Connect(ctx, cfg, held)
		if cerr == nil {
			serr := c.SignIn(ctx, acct.Name, source, tok)
			if serr == nil {
				return fmt.Sprintf(", stored by the running syncd (pid %d), whose next pass uses the sign-in", c.PID()), nil
			}
			var refused *Refusal
			if errors.As(serr, &refused) {
				return "", fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again", what, serr, login)
			}
			cerr = serr
		}
		if time.Now().After(deadline) {
			return "", &app.StateError{Err: fmt.Errorf("signed in, but the %s could not be saved (%w): run `%s` again once the state is free", what, cerr, login)}
		}
		select {
		case <-ctx.Done():
			return "", &InterruptedError{Err: ctx.Err()}
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// SignInStatus is the stored scheduling sign-in, checked at the token
// endpoint (the source's StoredSignIn) when the state can be opened for
// writing; beside a running syncd that holds the state, it is read only
// (local set).
func SignInStatus(ctx context.Context, cfg *config.Config, namespace string, log *zap.Logger) (tok oauth.Token, local bool, err error) {
	store, err := app.OpenStoreWaiting(ctx, cfg, namespace, 5*time.Second)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		ro, rerr := app.OpenStore(ctx, cfg, true)
		if held, ok := HeldByDaemon(rerr); ok {
			// A state file its daemon writes cannot be read beside it: the
			// daemon reads the sign-in (its facts, never a token).
			c, cerr := Connect(ctx, cfg, held)
			if cerr != nil {
				return tok, true, cerr
			}
			tok, err = c.SignInStatus(ctx, namespace)
			return tok, true, err
		}
		if rerr != nil {
			return tok, true, rerr
		}
		defer ro.Close()
		tok, err = storedSchedulingSignIn(ctx, cfg, namespace, ro, log, false)
		return tok, true, err
	}
	if err != nil {
		return tok, false, err
	}
	defer store.Close()
	tok, err = storedSchedulingSignIn(ctx, cfg, namespace, store, log, true)
	return tok, false, err
}

// storedSchedulingSignIn is the scheduling sign-in of the account of
// namespace in store (source.Login's StoredSignIn): with check, refreshed
// at the token endpoint, which writes the rotated pair in store.
func storedSchedulingSignIn(ctx context.Context, cfg *config.Config, namespace string, store state.Store, log *zap.Logger, check bool) (oauth.Token, error) {
	l, err := app.LoginSource(sourceScheduling)
	if err != nil {
		return oauth.Token{}, err
	}
	// Only the namespace is known here (`validate` and the daemon's
	// requests name no account), and all the check needs of the account.
	acct := config.Account{Name: namespace}
	if namespace == "" {
		acct.Name = config.DefaultAccount
	}
	v, err := l.StoredSignIn(ctx, source.Env{Config: cfg, Account: acct, Store: store, Log: log}, check)
	tok, _ := v.(oauth.Token)
	return tok, err
}

// FormsSignIns reads and checks the Forms API sign-ins of `auth status
// --source forms`: in the state, or by the running syncd that holds it.
type FormsSignIns struct {
	cfg    *config.Config
	log    *zap.Logger
	store  state.Store
	daemon *Client
}

// OpenFormsSignIns opens the state to read the sign-ins: for writing, or,
// beside a running syncd, read only or through that syncd. Every error is
// the state's.
func OpenFormsSignIns(ctx context.Context, cfg *config.Config, log *zap.Logger) (*FormsSignIns, error) {
	store, err := app.OpenStoreWaiting(ctx, cfg, "", 5*time.Second)
	var locked *state.LockedError
	if errors.As(err, &locked) {
		// A running syncd holds the state: its sign-ins can still be read.
		store, err = app.OpenStore(ctx, cfg, true)
	}
	// A state file the daemon writes cannot be read beside it: the daemon
	// reads and checks the sign-ins.
	s := &FormsSignIns{cfg: cfg, log: log, store: store}
	if held, ok := HeldByDaemon(err); ok {
		s.store = nil // OpenStore's failed open may be a nil store in a non-nil interface
		s.daemon, err = Connect(ctx, cfg, held)
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Daemon is the pid of the running syncd that reads the sign-ins; ok is
// false when the state is read here.
func (s *FormsSignIns) Daemon() (pid int, ok bool) {
	if s.daemon == nil {
		return 0, false
	}
	return s.daemon.PID(), true
}

// Check is the sign-in of acct and whether it works: app.ErrNoFormsToken
// when there is none, the Forms API's refusal when it refuses it.
func (s *FormsSignIns) Check(ctx context.Context, acct config.Account) (formsauth.Token, error) {
	if s.daemon != nil {
		return s.daemon.FormsSignInStatus(ctx, acct.Name)
	}
	l, err := app.LoginSource(sourceForms)
	if err != nil {
		return formsauth.Token{}, err
	}
	// The check writes nothing: a state read beside a running syncd is
	// checked too.
	v, err := l.StoredSignIn(ctx, source.Env{Config: s.cfg, Account: acct, Store: s.store, Log: s.log}, true)
	tok, _ := v.(formsauth.Token)
	return tok, err
}

// Close closes the state, when it was opened here.
func (s *FormsSignIns) Close() error {
	if s.store == nil {
		return nil
	}
	return s.store.Close()
}

// ForgetSignIn deletes the sign-in of acct (source: scheduling or forms)
// with del when the state opens for writing, or through the running syncd
// that holds it. how is "" or says the daemon did it. A state out of reach
// is an *app.StateError.
func ForgetSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, del func(state.Store) error) (how string, err error) {
	store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
	if held, ok := HeldByDaemon(err); ok {
		c, cerr := Connect(ctx, cfg, held)
		if cerr != nil {
			return "", &app.StateError{Err: cerr}
		}
		if err := c.SignOut(ctx, acct.Name, source); err != nil {
			return "", err
		}
		return fmt.Sprintf(" (by the running syncd, pid %d)", c.PID()), nil
	}
	if err != nil {
		return "", &app.StateError{Err: err}
	}
	defer store.Close()
	return "", del(store)
}
