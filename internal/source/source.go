// Package source is the contract of a source at the account level: what
// the app knows of the Forms API, the scheduling API or any other source,
// without knowing which. A source opens, for one account, from its own
// configuration section, and offers that account's streams (the
// stream-level contract is internal/poller's Stream and its capabilities).
// Everything else a source may do (sign in before a pass, receive
// webhooks, check the ids a command names, probe its service for
// `validate`, estimate a dry run) is a named optional interface below,
// which the app finds by type assertion, as the engine finds a stream's.
//
// The app keeps the explicit list of sources (internal/app/sources.go);
// there is no registry.
package source

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// Source is one kind of source, as the app lists it.
type Source interface {
	// Name names the source in stream keys, results, metrics and webhook
	// paths ("forms", "scheduling").
	Name() string
	// Open opens the source for one account; (nil, nil) when the account
	// does not use it. An error fails the account's opening.
	Open(ctx context.Context, env Env) (Account, error)
}

// Env is what a source opens an account's side with.
type Env struct {
	Config  *config.Config
	Account config.Account
	// Store is the state: a source keeps its sign-ins there.
	Store state.Store
	Log   *zap.Logger
	// Observer sees the source's requests (the account's metrics); nil:
	// none.
	Observer httpapi.Observer
}

// Account is a source opened for one account.
type Account interface {
	// Streams are the streams a live pass syncs, as the source lists them
	// now (it may ask its service). An error fails this source's pass of
	// the account alone.
	Streams(ctx context.Context) ([]Stream, error)
}

// Stream is one stream of an account's source and where its sync
// starts.
type Stream struct {
	poller.Stream
	// Start is the first time the stream syncs from.
	Start time.Time
}

// Endpoints is a Source that receives webhooks: the receiver authenticates
// and decodes its deliveries through its endpoint.
type Endpoints interface {
	Endpoint() webhook.Endpoint
}

// SignIn is an Account whose credentials are read again before each pass
// (a sign-in kept in the state, which `auth login` replaces).
type SignIn interface {
	// SignIn reads the current sign-in; an error (none yet, unreadable)
	// fails this source's pass of the account alone.
	SignIn(ctx context.Context) error
}

// Selector is an Account whose streams are named by ids a command or the
// configuration gives (form ids): Check makes sure each exists, before
// anything is written.
type Selector interface {
	// Check returns an error naming every id the account does not have,
	// with the closest ids it has; nil when ids is empty.
	Check(ctx context.Context, ids []string) error
	// Select is Check of the ids a command names to sync: an id the
	// account's configuration never syncs (excluded, not among those it
	// lists, or not carrying what it selects by) is an error too.
	Select(ctx context.Context, ids []string) error
}

// Explainer is an Account that says what a failure of its pass means for
// the account (a key refused: which setting to fix), when a
// configuration has many accounts and the message must name one.
type Explainer interface {
	// Explain is err as the account's failure; err itself when the source
	// has nothing to add.
	Explain(account string, err error) error
}

// WebhookRemover is an Account whose webhooks syncd registers at its
// service and records in the state: `webhooks remove` deletes each by the
// id recorded, without knowing whose service it is.
type WebhookRemover interface {
	// RemoveWebhook deletes the webhook of that id; one gone already is
	// not an error when the service can tell.
	RemoveWebhook(ctx context.Context, id string) error
}

// Prober is a Source that `validate` can try for an account without
// syncing or opening it: one cheap request that proves its settings and
// credentials. The env has no state: a probe reads no sign-in.
type Prober interface {
	Probe(ctx context.Context, env Env) error
}

// Estimate is what a dry run expects a stream's sync to cost.
type Estimate struct {
	// Records is about how many records the range holds; -1: unknown.
	Records int
	// Requests is about how many requests a pass makes reading them.
	Requests int
}

// Estimator is an Account that can estimate what reading a window of a
// stream takes, without reading it (the dry run): w is as the engine's
// planner cut it (w.Rows -1: not counted). The requests an estimate
// makes itself show in the stream's Requests, not in Estimate.Requests.
type Estimator interface {
	Estimate(ctx context.Context, s Stream, w poller.PlannedWindow) (Estimate, error)
}

// Namer is a Source whose streams a command may name by their key (a
// STREAM of `state adopt`), beside the ids an account's Selector checks.
type Namer interface {
	// Names reports whether arg names a stream of the source for acct,
	// bare or in the account's namespace; an account that does not use
	// the source has none.
	Names(acct config.Account, arg string) bool
}
