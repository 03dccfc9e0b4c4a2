package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
)

// Reader is one account's sources opened to read only, for a command that
// checks the stream ids it names before it opens anything, or plans a dry
// run: it writes no state and refreshes no sign-in. Its sources count
// their requests (every attempt), which a plan reports.
type Reader struct {
	cfg      *config.Config
	acct     config.Account
	log      *zap.Logger
	forms    formJobs
	requests *requestCounter
}

// formJobs is what the reader asks of the forms opened read-only: the
// streams a command names by id (source.Jobs), checked before anything is
// written (source.Selector).
type formJobs interface {
	source.Jobs
	source.Selector
}

// OpenReader opens account ac of cfg to read only. An account without
// forms cannot be read (yet): every command that reads one names forms.
func OpenReader(ctx context.Context, cfg *config.Config, ac config.Account, log *zap.Logger) (*Reader, error) {
	r := &Reader{cfg: cfg, acct: ac, log: log, requests: &requestCounter{}}
	a, err := readOnlyForms(ctx, r.env(log))
	if err != nil {
		return nil, err
	}
	f, ok := a.(formJobs)
	if !ok {
		return nil, fmt.Errorf("the %s source cannot list the forms of account %s without syncing", poller.SourceForms, ac.Name)
	}
	r.forms = f
	return r, nil
}

// env is what the reader opens a source of its account with: the state
// read-only, and its request counter.
func (r *Reader) env(log *zap.Logger) source.Env {
	return source.Env{Config: r.cfg, Account: r.acct, Store: readOnlyState{cfg: r.cfg}, Log: log, Observer: r.requests}
}

// readOnlyForms opens the forms of env's account to read only, for the
// commands that read forms: an account without any is refused.
func readOnlyForms(ctx context.Context, env source.Env) (source.Account, error) {
	if !env.Account.HasForms() {
		return nil, fmt.Errorf("account %s has no Forms API key: this command reads forms", env.Account.Name)
	}
	src := ListedSource(poller.SourceForms)
	if src == nil {
		return nil, fmt.Errorf("no %s source is listed", poller.SourceForms)
	}
	return openReadOnly(ctx, src, env)
}

// openReadOnly opens a listed source for env's account to read only
// (source.ReadOnly); nil when the account does not use it, or the source
// cannot be opened so (it is then neither checked nor planned).
func openReadOnly(ctx context.Context, src source.Source, env source.Env) (source.Account, error) {
	ro, ok := src.(source.ReadOnly)
	if !ok {
		return nil, nil
	}
	return ro.OpenReadOnly(ctx, env)
}

// Config is the configuration the reader was opened with.
func (r *Reader) Config() *config.Config { return r.cfg }

// Select checks the stream ids a command names to sync, before anything is
// written (source.Selector's Select): IsBadID tells an id refused from a
// failure to ask.
func (r *Reader) Select(ctx context.Context, ids []string) error {
	return r.forms.Select(ctx, ids)
}

// Check makes sure every id names a stream the account has
// (source.Selector's Check), whether or not its configuration syncs it.
func (r *Reader) Check(ctx context.Context, ids []string) error {
	return r.forms.Check(ctx, ids)
}

// IsBadID reports whether err, of Select or Check, refuses an id (one the
// account does not have, or never syncs), rather than failing to ask.
func IsBadID(err error) bool { return errors.Is(err, source.ErrBadID) }

// Jobs are the jobs of ids (each once), or every job of the account when
// ids is empty.
func (r *Reader) Jobs(ctx context.Context, ids []string) ([]poller.Job, error) {
	return jobsOf(ctx, r.forms.Jobs, r.forms.Job, ids)
}

// JobsOf is what a pass of the forms a command names runs (Pass): the jobs
// of ids (each once), or every job of the account when ids is empty.
func (acct *Account) JobsOf(ids []string) func(context.Context) ([]poller.Job, error) {
	return func(ctx context.Context) ([]poller.Job, error) { return jobsOf(ctx, acct.Jobs, acct.Job, ids) }
}

// jobsOf are the jobs of ids, or all of them when ids is empty.
func jobsOf(ctx context.Context, all func(context.Context) ([]poller.Job, error), one func(string) poller.Job, ids []string) ([]poller.Job, error) {
	if len(ids) == 0 {
		return all(ctx)
	}
	jobs := make([]poller.Job, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			jobs = append(jobs, one(id))
		}
	}
	return jobs, nil
}

// requestCounter counts the requests the sources of a Reader make (every
// attempt); it is their httpapi.Observer.
type requestCounter struct{ n atomic.Int64 }

func (c *requestCounter) ObserveRequest(string, int, int, time.Duration, error) { c.n.Add(1) }

// OneAccount is the configured account a command for one account works
// on, before anything is opened: the one names selects (--account), or
// the only account; an *AccountNeededError when that is not one.
func OneAccount(cfg *config.Config, names []string) (config.Account, error) {
	list, err := SelectAccounts(cfg, names)
	if err != nil {
		return config.Account{}, err
	}
	if len(list) != 1 {
		names := make([]string, 0, len(list))
		for _, a := range list {
			names = append(names, a.Name)
		}
		return config.Account{}, &AccountNeededError{Names: names}
	}
	return list[0], nil
}
