package scheduling

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
)

var (
	_ source.ReadOnly  = Source{}
	_ source.SignIn    = (*readOnly)(nil)
	_ source.Estimator = (*readOnly)(nil)
)

// OpenReadOnly opens the account's bookings to read only (a dry run):
// their client reads the access token the state holds as it is, since a
// refresh rotates the sign-in and nothing would keep the new one. A
// sign-in that cannot be used so does not fail the opening: the stream is
// named, and the account's SignIn says why it cannot be read. nil when
// the account does not sign in to the scheduling API.
func (Source) OpenReadOnly(ctx context.Context, env source.Env) (source.Account, error) {
	if !env.Account.Scheduling {
		return nil, nil
	}
	tok, signIn := storedToken(ctx, env)
	counter := &Counter{Next: env.Observer}
	client, err := NewClient(env.Config, heldToken{tok}, env.Log, counter)
	if err != nil {
		// The stream is not read, but named: the pass would fail too.
		client, signIn = nil, err
	}
	b := env.Config.Scheduling.Bookings
	stream := NewAccountStream(env.Account.Namespace(), client, b.Table, nil, counter)
	return &readOnly{acct: &Account{Client: client, Stream: stream, Start: b.StartDate}, signIn: signIn}, nil
}

// storedToken is the account's access token as env.Store holds it; the
// error says why it cannot be used as it is. Its words are the dry run's,
// which is what opens the bookings to read only.
func storedToken(ctx context.Context, env source.Env) (oauth.Token, error) {
	if env.Store == nil {
		return oauth.Token{}, errors.New("not planned: the sign-in cannot be read (there is no state)")
	}
	tok, err := StateTokens{Store: env.Store, Namespace: env.Account.Namespace()}.Load(ctx)
	var unreadable *source.UnreadableStateError
	switch {
	case errors.As(err, &unreadable):
		return tok, fmt.Errorf("not planned: the sign-in cannot be read (%v)", unreadable.Err)
	case errors.Is(err, oauth.ErrNoToken):
		return tok, errors.New("not signed in: run `syncd auth login`")
	case err != nil:
		return tok, err
	case !tok.Fresh(time.Now(), time.Minute):
		return tok, errors.New("not planned: the access token has expired, and a dry run does not refresh it (that would rotate the sign-in without keeping it); the pass refreshes it")
	}
	return tok, nil
}

// readOnly is the bookings opened to read only.
type readOnly struct {
	acct   *Account
	signIn error
}

// Streams is the bookings, whether or not the sign-in can be used.
func (r *readOnly) Streams(ctx context.Context) ([]source.Stream, error) { return r.acct.Streams(ctx) }

// SignIn is why the stored sign-in cannot be used without refreshing it;
// nil when it can.
func (r *readOnly) SignIn(context.Context) error { return r.signIn }

// Estimate is the bookings' estimate (Account.Estimate).
func (r *readOnly) Estimate(ctx context.Context, s source.Stream, w poller.PlannedWindow) (source.Estimate, error) {
	return r.acct.Estimate(ctx, s, w)
}

// heldToken hands out one access token, never refreshed.
type heldToken struct{ tok oauth.Token }

func (h heldToken) Token(context.Context) (oauth.Token, error) { return h.tok, nil }
func (heldToken) Invalidate(string)                            {}
