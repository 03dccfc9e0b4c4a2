package source

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/state"
)

// Login is a Source an account signs in to with the authorization-code
// flow of `syncd auth login`, keeping the sign-in in the state (where its
// Account's SignIn reads it before each pass). The `auth` commands, the
// control endpoint and a restore of the state find it by type assertion
// and the source's name, and name no source themselves.
type Login interface {
	Source
	// LoginSection refuses a configuration without the section that signs
	// in to the source, saying what to add.
	LoginSection(cfg *config.Config) error
	// LoginAccount refuses an account that does not sign in to the source:
	// it has no sign-in to log in, out or check.
	LoginAccount(acct config.Account) error
	// LoginCommand is the command that signs the account named account in
	// again, as a refused sign-in names it.
	LoginCommand(account string) string
	// NewLogin is the sign-in of env's account (env.Store is not used: the
	// state is opened only to save it); an error is the configuration's.
	NewLogin(env Env) (*LoginFlow, error)
	// Secrets are the names of the secrets the source keeps in the state
	// for acct (its sign-in; none when acct does not sign in to it): those
	// a restore of an older state keeps.
	Secrets(acct config.Account) []string
	// DeleteSignIn forgets the sign-in of the account of namespace.
	DeleteSignIn(ctx context.Context, store state.Store, namespace string) error
	// StoredSignIn is the sign-in env.Store holds for env's account, never
	// a secret's value to print but the source's token type (what a running
	// syncd's control endpoint carries). With check, it is also tried at
	// the service, which may write the state (a rotated token): check only
	// in a state opened for writing.
	StoredSignIn(ctx context.Context, env Env, check bool) (any, error)
	// SaveSignIn saves in store the sign-in a running syncd was handed
	// (SignedIn.Token, as JSON) for acct.
	SaveSignIn(ctx context.Context, store state.Store, acct config.Account, token json.RawMessage) error
}

// ErrNoSignIn is matched with errors.Is by a source's error saying that
// an account which signs in has no sign-in stored: `auth login` fixes it.
var ErrNoSignIn = errors.New("source: not signed in")

// LiveSignIn is an Account whose stored sign-in a running token source
// holds (it refreshes and caches the access token): a sign-in stored or
// forgotten beside it goes through it, so that a refresh in flight cannot
// save over the new one and the next request starts from what is stored.
type LiveSignIn interface {
	// ReplaceSignIn runs write (which saves or deletes the stored
	// sign-in) with the token source held, and drops what it cached.
	ReplaceSignIn(ctx context.Context, write func(context.Context) error) error
}

// LoginFlow is one account's sign-in: a request whose URL the person
// opens, then, with the code of the redirect, the exchange and the check,
// which leave the sign-in to save.
type LoginFlow struct {
	// RedirectURI is where the browser is sent back with the code.
	RedirectURI string
	// Command is the command to run again should the sign-in fail.
	Command string
	// What is what the messages of a failed save call the sign-in
	// ("tokens", "token").
	What string
	// Request is a new authorization request: the URL to open and the
	// state the redirect must carry back.
	Request func() (url, state string, err error)
	// Finish exchanges code and checks the sign-in, each failure marked
	// with its step (oauth.StepFailed) for the browser's page.
	Finish func(ctx context.Context, code string) (*SignedIn, error)
}

// SignedIn is a sign-in obtained and checked, not yet saved: the caller
// saves it in the state, or sends it to the running syncd that holds the
// state.
type SignedIn struct {
	// Token is what the control endpoint of a running syncd takes.
	Token any
	// Save writes the sign-in in a state opened for writing.
	Save func(ctx context.Context, store state.Store) error
	// Text writes what `auth login` prints once it is saved: where is the
	// state, how says who saved it ("" or the running syncd).
	Text func(w io.Writer, where, how string)
}

// Connector is a Login whose users also sign in through the connect page
// of `syncd run` (internal/connect), which the daemon serves at its public
// URL.
type Connector interface {
	// ConnectClient is the OAuth client that redirects to the page's
	// callback, redirect.
	ConnectClient(env Env, redirect string) (*oauth.Client, error)
	// WhoAmI is tok with the user it signs in, as the service names them;
	// tok unchanged when the service does not say (the sign-in still
	// works).
	WhoAmI(ctx context.Context, env Env, tok oauth.Token) oauth.Token
}
