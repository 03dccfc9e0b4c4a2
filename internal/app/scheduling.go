package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/connect"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/table"
)

// SignIns are the scheduling sign-ins the state holds of cfg's accounts
// that sign in, by account name: who, scopes, expiry, never a token.
func SignIns(ctx context.Context, cfg *config.Config, store state.Store) map[string]*status.SignIn {
	out := map[string]*status.SignIn{}
	l, err := LoginSource(SignInScheduling)
	if err != nil {
		return out
	}
	for _, a := range cfg.AccountList() {
		if !a.Scheduling {
			continue
		}
		s := &status.SignIn{Scopes: []string{}}
		v, err := l.StoredSignIn(ctx, source.Env{Config: cfg, Account: a, Store: store}, false)
		tok, _ := v.(oauth.Token)
		switch {
		case errors.Is(err, oauth.ErrNoToken):
		case err != nil:
			s.Error = err.Error()
		default:
			s.SignedIn, s.User, s.Expiry = true, tok.User, status.TimePtr(tok.Expiry)
			if tok.Scopes != nil {
				s.Scopes = tok.Scopes
			}
		}
		out[a.Name] = s
	}
	return out
}

// AccountsView summarizes cfg's accounts from a view of store (for
// /status?accounts=1 and `syncd accounts`).
func AccountsView(current func() *config.Config, store state.Store) func(ctx context.Context, v status.View) []status.Account {
	return func(ctx context.Context, v status.View) []status.Account {
		cfg := current()
		list := cfg.AccountList()
		names := make([]string, len(list))
		ns := map[string]string{}
		for i, a := range list {
			names[i] = a.Name
			ns[a.Name] = a.Namespace()
		}
		return status.Accounts(v, names, func(n string) string { return ns[n] }, table.SplitStreamKey, SignIns(ctx, cfg, store), time.Now())
	}
}

// StreamConfigured tells whether cfg still names a stream of the state
// (its key, namespace included): false for a stream of an account the
// configuration no longer has, the bookings of an account that no longer
// signs in to the scheduling API, a form the account excludes, and a form
// missing from an account that lists its forms by id (and selects none by
// tag). A form of an account that syncs every form, or selects some by
// tag, counts as named: only the API could tell otherwise.
func StreamConfigured(cfg *config.Config) func(key string) bool {
	accounts := map[string]config.Account{}
	for _, a := range cfg.AccountList() {
		accounts[a.Namespace()] = a
	}
	return func(k string) bool {
		ns, key := table.SplitStreamKey(k)
		a, ok := accounts[ns]
		if !ok {
			return false
		}
		if src, _, isOther := strings.Cut(key, "/"); isOther {
			return src != table.ReservedNamespace || a.Scheduling
		}
		if slices.Contains(a.Exclude, key) {
			return false
		}
		if len(a.Forms) == 0 || len(a.Tags) > 0 {
			return true
		}
		return slices.ContainsFunc(a.Forms, func(f config.FormConfig) bool { return f.ID == key })
	}
}

// StreamStart is where a configured stream's history starts: its form's
// start_date, sync.start_date, or the beginning (the Unix epoch); the
// bookings' scheduling.bookings.start_date. ok is false for a stream the
// configuration does not name.
func StreamStart(cfg *config.Config) func(key string) (time.Time, bool) {
	configured := StreamConfigured(cfg)
	accounts := map[string]config.Account{}
	for _, a := range cfg.AccountList() {
		accounts[a.Namespace()] = a
	}
	orEpoch := func(t time.Time) time.Time {
		if t.IsZero() {
			return time.Unix(0, 0).UTC()
		}
		return t
	}
	return func(k string) (time.Time, bool) {
		if !configured(k) {
			return time.Time{}, false
		}
		ns, key := table.SplitStreamKey(k)
		if strings.Contains(key, "/") {
			if cfg.Scheduling == nil {
				return time.Time{}, false
			}
			return orEpoch(cfg.Scheduling.Bookings.StartDate.Time), true
		}
		for _, f := range accounts[ns].Forms {
			if f.ID == key && !f.StartDate.IsZero() {
				return f.StartDate.Time, true
			}
		}
		return orEpoch(cfg.Sync.StartDate.Time), true
	}
}

// fixedToken hands out one token (the one a dry run read from the state).
type fixedToken struct{ tok oauth.Token }

func (f fixedToken) Token(context.Context) (oauth.Token, error) { return f.tok, nil }
func (fixedToken) Invalidate(string)                            {}

// ConnectHandler is the connect page of `syncd run` (internal/connect):
// nil when server.connect_secret is not set. It signs the users of the
// accounts open now (a reload changes them) in with the scheduling
// section's OAuth client, redirected back to server.public_url.
func (a *App) ConnectHandler() (*connect.Handler, error) {
	cfg := a.Cfg
	if cfg.Server.ConnectSecret == "" {
		return nil, nil
	}
	c, ok := ListedSource(SignInScheduling).(source.Connector)
	if !ok {
		return nil, fmt.Errorf("no listed source named %s signs in through the connect page", SignInScheduling)
	}
	callback := strings.TrimRight(cfg.Server.PublicURL, "/") + connect.PathCallback
	oc, err := c.ConnectClient(source.Env{Config: cfg, Log: a.Log, Observer: a.Metrics}, callback)
	if err != nil {
		return nil, err
	}
	return connect.New(connect.Options{
		Secret: []byte(cfg.Server.ConnectSecret.Reveal()),
		Known: func(name string) bool {
			acct := a.Account(name)
			return acct != nil && acct.sourceAccount(SignInScheduling) != nil
		},
		OAuth: func(string) (*oauth.Client, error) { return oc, nil },
		Save: func(ctx context.Context, name string, tok oauth.Token) error {
			acct := a.Account(name)
			if acct == nil || acct.sourceAccount(SignInScheduling) == nil {
				return fmt.Errorf("account %s is no longer configured to sign in to the scheduling API", name)
			}
			tok = c.WhoAmI(ctx, source.Env{Config: cfg, Account: acct.Cfg, Log: acct.Log}, tok)
			raw, err := json.Marshal(tok)
			if err != nil {
				return fmt.Errorf("hand the sign-in of account %s over: %w", name, err)
			}
			if err := a.StoreSignIn(ctx, name, SignInScheduling, raw); err != nil {
				return err
			}
			logSignIn(acct, "through the connect page", tok.User)
			return nil
		},
		Logger: a.Log.Named("connect"),
	})
}
