package app

import (
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
)

// What the read-only commands and the sign-in still call of the forms
// source by name, while they move behind the source contract.

// NewAccountClient builds the Forms API client of acct; clients of one key
// share a rate limiter through limiters (nil: a limiter of their own).
func NewAccountClient(cfg *config.Config, acct config.Account, limiters *forms.Limiters, log *zap.Logger, obs forms.Observer) (*forms.Client, error) {
	return formsource.NewAccountClient(cfg, acct, limiters, log, obs)
}

// APIKey is the account's Forms API key: api_key, or the content of
// api_key_file (a mounted secret), read now.
func APIKey(acct config.Account) (string, error) { return formsource.APIKey(acct) }

// formsClient is the account's Forms API client now (nil: none).
func (acct *Account) formsClient() *forms.Client {
	if f, ok := acct.jobs.(*formsource.Account); ok {
		return f.Client()
	}
	return nil
}
