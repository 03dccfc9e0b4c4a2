package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/connect"
	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/table"
)

// TokenSecret is where the scheduling API tokens of the account of
// namespace live in the state store (scheduling.TokenSecret).
func TokenSecret(namespace string) string { return scheduling.TokenSecret(namespace) }

// secretNames are what the sources of cfg's accounts keep in the state
// store (their sign-ins): a restore of an older state keeps the newer
// values (KeepSecrets).
func secretNames(cfg *config.Config) []string {
	var out []string
	for _, a := range cfg.AccountList() {
		if a.Scheduling {
			out = append(out, TokenSecret(a.Namespace()))
		}
		if a.FormsOAuth {
			out = append(out, FormsTokenSecret(a.Namespace()))
		}
	}
	return out
}

// KeepSecrets reads the sign-ins the state at cfg holds now, and returns
// what puts them back: a restore replaces the state with a backup, whose
// refresh tokens were rotated since and are spent (the next pass would fail
// with invalid_grant), so the newer ones stay. A state that does not exist
// or holds none keeps the backup's.
func KeepSecrets(ctx context.Context, cfg *config.Config) (func(ctx context.Context, store state.Store) (int, error), error) {
	kept := map[string][]byte{}
	store, err := OpenStore(ctx, cfg, true)
	if err == nil {
		for _, name := range secretNames(cfg) {
			v, gerr := store.GetSecret(ctx, name)
			if gerr != nil {
				store.Close()
				return nil, fmt.Errorf("read the sign-ins of the state before the restore: %w", gerr)
			}
			if v != nil {
				kept[name] = v
			}
		}
		store.Close()
	}
	return func(ctx context.Context, store state.Store) (int, error) {
		for name, v := range kept {
			if err := store.PutSecret(ctx, name, v); err != nil {
				return 0, fmt.Errorf("keep the newer sign-in %s: %w", name, err)
			}
		}
		return len(kept), nil
	}, nil
}

// StateTokens keeps the scheduling API's tokens of one account in the
// state store (scheduling.StateTokens).
type StateTokens = scheduling.StateTokens

// NewOAuthClient is the OAuth client the scheduling section describes.
func NewOAuthClient(cfg *config.Config, log *zap.Logger, obs httpapi.Observer) (*oauth.Client, error) {
	return scheduling.NewOAuthClient(cfg, log, obs)
}

// NewSchedulingClient is the scheduling API client over tokens.
func NewSchedulingClient(cfg *config.Config, tokens scheduling.Tokens, log *zap.Logger, obs httpapi.Observer) (*scheduling.Client, error) {
	return scheduling.NewClient(cfg, tokens, log, obs)
}

// Scheduling is the open scheduling source of an account.
type Scheduling = scheduling.Account

// CheckSignIn asks the token endpoint whether the stored sign-in still
// works, by refreshing it: a token that merely looks valid here may have
// been revoked at the server, and only a refresh shows that of the refresh
// token. A refresh rotates the refresh token, so it must never cost the
// sign-in: the stored pair is first written back unchanged, so that a
// state that cannot be written fails before the rotation (the sign-in
// untouched), and the rotated pair's save is tried again before it is
// given up, with an error that says so. It returns the fresh token, or the
// stored one with the error that says what to do (`syncd auth login` for a
// revoked or expired sign-in).
func CheckSignIn(ctx context.Context, cfg *config.Config, namespace string, store state.Store, log *zap.Logger) (oauth.Token, error) {
	tokens := StateTokens{Store: store, Namespace: namespace}
	stored, err := tokens.Load(ctx)
	if err != nil {
		return stored, err
	}
	oc, err := NewOAuthClient(cfg, log, nil)
	if err != nil {
		return stored, err
	}
	where := StateWhere(cfg)
	if err := tokens.Save(ctx, stored); err != nil {
		return stored, fmt.Errorf("the state %s cannot be written (%w): syncd did not refresh the token to check the sign-in at the token endpoint, "+
			"since the rotated refresh token could not be saved and the sign-in would be lost; the sign-in is unchanged: "+
			"make the state writable (permissions, free space) and run `syncd auth status` again", where, err)
	}
	fresh, err := oc.Refresh(ctx, stored)
	if err != nil {
		return stored, err
	}
	if err := saveRotated(ctx, tokens, fresh); err != nil {
		log.Error("the scheduling API rotated the refresh token, and the new one could not be saved: the sign-in is lost",
			zap.String(logkey.State, where), zap.Error(err))
		return stored, fmt.Errorf("the scheduling API rotated the refresh token when syncd refreshed it to check the sign-in, "+
			"but the new one could not be saved in the state %s (%w): the stored one no longer works; "+
			"make the state writable (permissions, free space), then run `syncd auth login`", where, err)
	}
	return fresh, nil
}

// saveRotated saves a rotated pair, trying again a few times: the server
// has retired the stored refresh token, so this save is the sign-in's only
// way on, and a busy or briefly failing state should not end it.
func saveRotated(ctx context.Context, tokens StateTokens, fresh oauth.Token) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		if err = tokens.Save(ctx, fresh); err == nil {
			return nil
		}
	}
	return err
}

// SignIns are the scheduling sign-ins the state holds of cfg's accounts
// that sign in, by account name: who, scopes, expiry, never a token.
func SignIns(ctx context.Context, cfg *config.Config, store state.Store) map[string]*status.SignIn {
	out := map[string]*status.SignIn{}
	for _, a := range cfg.AccountList() {
		if !a.Scheduling {
			continue
		}
		s := &status.SignIn{Scopes: []string{}}
		tok, err := StateTokens{Store: store, Namespace: a.Namespace()}.Load(ctx)
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

// WhoAmI names the signed-in user from GET /v2/me. A token without
// PROFILE_READ still works for bookings, so a refusal only warns.
func WhoAmI(ctx context.Context, cfg *config.Config, log *zap.Logger, tok oauth.Token) oauth.Token {
	client, err := NewSchedulingClient(cfg, fixedToken{tok}, log, nil)
	if err == nil {
		m, merr := client.Me(ctx)
		if merr == nil {
			tok.User, tok.UserID = m.Email, m.ID
			if tok.User == "" {
				tok.User = m.Username
			}
			return tok
		}
		err = merr
	}
	log.Warn("could not read the signed-in user (GET /v2/me); the tokens are stored anyway", zap.Error(err))
	return tok
}

// fixedToken hands out one token (the one just obtained).
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
	callback := strings.TrimRight(cfg.Server.PublicURL, "/") + connect.PathCallback
	oc, err := scheduling.NewOAuthClientAt(cfg, callback, a.Log, a.Metrics)
	if err != nil {
		return nil, err
	}
	return connect.New(connect.Options{
		Secret: []byte(cfg.Server.ConnectSecret.Reveal()),
		Known: func(name string) bool {
			acct := a.Account(name)
			return acct != nil && acct.Scheduling != nil
		},
		OAuth: func(string) (*oauth.Client, error) { return oc, nil },
		Save: func(ctx context.Context, name string, tok oauth.Token) error {
			acct := a.Account(name)
			if acct == nil || acct.Scheduling == nil {
				return fmt.Errorf("account %s is no longer configured to sign in to the scheduling API", name)
			}
			tok = WhoAmI(ctx, cfg, acct.Log, tok)
			if err := a.StoreSchedulingSignIn(ctx, name, tok); err != nil {
				return err
			}
			logSignIn(acct, "through the connect page", tok.User)
			return nil
		},
		Logger: a.Log.Named("connect"),
	})
}

// BookingsStreamKey is the bookings stream's key in the default account
// (scheduling.StreamKey): the commands name it without importing the
// source.
const BookingsStreamKey = scheduling.StreamKey
