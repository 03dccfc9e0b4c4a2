package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/shard"
	"github.com/syncd-dev/syncd/internal/state"
)

// accountClaimer claims accounts for the coordinator: an account's claim
// is its namespace's lease in the state split by account.
type accountClaimer struct{ store state.Claimer }

func (c accountClaimer) namespace(account string) string {
	if account == config.DefaultAccount {
		return ""
	}
	return account
}

func (c accountClaimer) Claim(ctx context.Context, account string) error {
	return c.store.Claim(ctx, c.namespace(account))
}

func (c accountClaimer) Release(account string) error { return c.store.Release(c.namespace(account)) }

func (c accountClaimer) Lost(account string) <-chan struct{} {
	return c.store.Lost(c.namespace(account))
}

// Coordinator is the coordinator of `syncd run` on a shared state: it
// claims this replica's share of the accounts, and kick asks the daemon to
// reload its entries (open the accounts claimed, close those given back).
func (a *App) Coordinator(ctx context.Context, kick func()) (*shard.Coordinator, error) {
	c, ok := a.Store.(state.Claimer)
	if !ok || !a.shared {
		return nil, errors.New("state.shared needs state.url: the replicas share the state in a bucket")
	}
	members, err := shard.MembersURL(a.Cfg.State.URL)
	if err != nil {
		return nil, err
	}
	// Heartbeats three times a lease: a dead replica's accounts wait about
	// one lease TTL and one heartbeat before a peer takes them.
	ttl := a.Cfg.State.LeaseTTL.D()
	beat := max(ttl/3, 200*time.Millisecond)
	return shard.New(ctx, shard.Options{
		Members:   members,
		ID:        os.Getenv("POD_NAME"),
		Heartbeat: beat,
		TTL:       ttl,
		Accounts:  a.accountNames,
		Claimer:   accountClaimer{store: c},
		IsHeld: func(err error) bool {
			var le *state.LockedError
			return errors.As(err, &le)
		},
		BeforeRelease: func(ctx context.Context, account string) error { return a.disown(ctx, account, kick) },
		OnChange: func(owned []string) {
			a.SetOwned(owned)
			kick()
		},
		Logger: a.Log.Named("shard"),
	})
}

// accountNames are the accounts of the current configuration this process
// may claim (--account narrows them).
func (a *App) accountNames() []string {
	list, err := SelectAccounts(a.Current(), a.opts.Accounts)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(list))
	for _, ac := range list {
		names = append(names, ac.Name)
	}
	return names
}

// disown stops the account's passes before its lease is given back: no
// new batch starts, the daemon drops its entries (kick), and the account
// closes once its pass in flight ends.
func (a *App) disown(ctx context.Context, name string, kick func()) error {
	a.mu.Lock()
	delete(a.owns, name)
	var acct *Account
	for _, x := range a.Accounts {
		if x.Name == name {
			acct = x
		}
	}
	a.mu.Unlock()
	if acct == nil {
		return nil
	}
	acct.Poller.Drain()
	kick()
	select {
	case <-acct.Closed():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("give back account %s: its pass did not end: %w", name, ctx.Err())
	}
}

// CloseAccounts closes every open account (their passes have ended), and
// keeps the state open: on a shared state the coordinator then gives the
// leases back.
func (a *App) CloseAccounts() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, acct := range a.Accounts {
		errs = append(errs, acct.Close())
	}
	return errors.Join(errs...)
}
