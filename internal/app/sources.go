package app

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// sourceList is the explicit list of the sources syncd syncs, in the
// order a pass runs them: no registry, no init(). A new source is its
// package and one line here; a test binary built with -tags testsource
// adds the test-only source (sources_testsource.go). An App lists them
// once: the Forms API's rate limits are shared by the accounts of one key
// across the App's life (its reloads too).
func sourceList() []source.Source {
	return append([]source.Source{formsource.Source{Limiters: forms.NewLimiters()}, scheduling.Source{}}, testSources()...)
}

// webhookEndpoints are the receiver's endpoints: those of the listed
// sources that take deliveries.
func webhookEndpoints(list []source.Source) []webhook.Endpoint {
	var out []webhook.Endpoint
	for _, s := range list {
		if e, ok := s.(source.Endpoints); ok {
			out = append(out, e.Endpoint())
		}
	}
	return out
}

// openSource is a listed source opened for an account.
type openSource struct {
	name string
	acct source.Account
}

// openSources opens the listed sources the account uses.
func (a *App) openSources(ctx context.Context, acct *Account) error {
	for _, src := range a.sources {
		sa, err := src.Open(ctx, source.Env{Config: a.Cfg, Account: acct.Cfg, Store: a.Store, Log: acct.Log, Observer: a.Metrics.ForAccount(acct.Name)})
		if err != nil {
			return err
		}
		if sa == nil {
			continue
		}
		if j, ok := sa.(source.Jobs); ok && acct.jobs == nil {
			// Its streams are chosen per pass, and synced concurrently
			// (Pass, SyncAll); another such source would be synced as
			// the others are.
			acct.jobs, acct.jobsName = j, src.Name()
			continue
		}
		acct.sources = append(acct.sources, openSource{name: src.Name(), acct: sa})
	}
	return nil
}

// sourceAccount is the account's opened source of that name (the jobs
// source, or one of sources); nil when the account does not use it.
func (acct *Account) sourceAccount(name string) source.Account {
	if name == acct.jobsName && acct.jobs != nil {
		return acct.jobs
	}
	for _, src := range acct.sources {
		if src.name == name {
			return src.acct
		}
	}
	return nil
}

// sourcePass is one live pass of a listed source's streams, one after the
// other; a stream failing does not stop the others.
func (acct *Account) sourcePass(ctx context.Context, src openSource) []poller.Result {
	streams, err := acct.sourceStreams(ctx, src)
	if err != nil {
		return []poller.Result{{Account: acct.Name, Source: src.name, Err: acct.explain(src, err)}}
	}
	results := make([]poller.Result, 0, len(streams))
	for _, s := range streams {
		if acct.Poller.Draining() {
			results = append(results, poller.Result{Account: acct.Name, Source: src.name, Stream: s.Key(), Table: s.Table(), Interrupted: true})
			continue
		}
		r := acct.Poller.Sync(ctx, s.Stream, s.Start)
		r.Account = acct.Name
		r.Err = acct.explain(src, r.Err)
		results = append(results, r)
	}
	return results
}

// sourceStreams are the streams of a listed source, once its sign-in is
// read (SignIn).
func (acct *Account) sourceStreams(ctx context.Context, src openSource) ([]source.Stream, error) {
	if s, ok := src.acct.(source.SignIn); ok {
		if err := s.SignIn(ctx); err != nil {
			return nil, err
		}
	}
	streams, err := src.acct.Streams(ctx)
	if err != nil {
		acct.Log.Error("listing the account's streams of a source failed; none of them is synced in this pass, the other sources are", zap.String(logkey.Source, src.name), zap.Error(err))
		return nil, fmt.Errorf("list the %s streams of account %s: %w", src.name, acct.Name, err)
	}
	return streams, nil
}

// explain is err as the source says it for the account, when the
// configuration has many accounts (the message must name one).
func (acct *Account) explain(src openSource, err error) error {
	if err == nil || !acct.app.Cfg.MultiAccount() {
		return err
	}
	if e, ok := src.acct.(source.Explainer); ok {
		return e.Explain(acct.Name, err)
	}
	return fmt.Errorf("account %s: %w", acct.Name, err)
}

// sourceBackfill loads [start, end) of a listed source's streams.
func (acct *Account) sourceBackfill(ctx context.Context, src openSource, start time.Time, backfill func(s poller.Stream, from time.Time, concurrency int) poller.Result) []poller.Result {
	streams, err := acct.sourceStreams(ctx, src)
	if err != nil {
		return []poller.Result{{Account: acct.Name, Source: src.name, Err: acct.explain(src, err)}}
	}
	var results []poller.Result
	for _, s := range streams {
		if acct.Poller.Draining() {
			break
		}
		r := backfill(s.Stream, start, 1)
		r.Account = acct.Name
		r.Err = acct.explain(src, r.Err)
		results = append(results, r)
	}
	return results
}

// SourceError is a source's failure as the source contract types it
// (auth, not found, rate limited, unavailable): the commands read it
// through app, and import no source.
type SourceError = source.Error

// The kinds of a SourceError.
const (
	SourceAuth        = source.Auth
	SourceNotFound    = source.NotFound
	SourceRateLimited = source.RateLimited
	SourceUnavailable = source.Unavailable
)

// AsSourceError is err's SourceError, or nil when err is no source's
// failure of a kind the contract knows.
func AsSourceError(err error) *SourceError { return source.AsError(err) }

// IsSourceError reports whether err is a source's failure of kind k.
func IsSourceError(err error, k source.Kind) bool { return source.Is(err, k) }

// Probe is what a listed source's probe found for an account.
type Probe struct {
	Source string
	Err    error
}

// ProbeSources probes the listed sources acct uses that can be tried
// without syncing (source.Prober): what `validate` checks beside the
// sources' own checks (source.Validator: the forms) and the bookings'
// sign-in, which it reads itself.
func ProbeSources(ctx context.Context, cfg *config.Config, acct config.Account, log *zap.Logger) []Probe {
	var out []Probe
	for _, src := range sourceList() {
		if p, ok := src.(source.Prober); ok {
			out = append(out, Probe{Source: src.Name(), Err: p.Probe(ctx, source.Env{Config: cfg, Account: acct, Log: log})})
		}
	}
	return out
}
