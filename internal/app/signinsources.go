package app

// The sign-in names of the forms and the scheduling sources that app's
// other files and internal/control's server still call directly, each
// with its callers. The `auth` commands and control's login go through
// the source.Login capability (signin.go); these go once their callers
// do too.

import (
	"context"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	formsource "github.com/syncd-dev/syncd/internal/source/forms"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/source/scheduling"
)

// FormsAuthError is the Forms API refusing a sign-in (the daemon's
// control endpoint answers its status; the client rebuilds it). Callers:
// control's client.go and server.go.
type FormsAuthError = forms.AuthError

// ErrNoFormsToken is an account with forms_oauth that has not signed in
// (formsource.ErrNoSignIn). Callers: control's client.go, server.go and
// signintext.go.
var ErrNoFormsToken = formsource.ErrNoSignIn

// FormsTokens keeps the Forms API sign-in of one account in the state
// store (formsource.Tokens). Callers: onrequest.go, control's server.go.
type FormsTokens = formsource.Tokens

// CheckFormsToken asks the Forms API whether tok works: GET
// {base_url}/forms (formsource.CheckToken). Caller: control's server.go.
func CheckFormsToken(ctx context.Context, cfg *config.Config, acct config.Account, tok formsauth.Token, log *zap.Logger) error {
	return formsource.CheckToken(ctx, cfg, acct, tok, log)
}

// StateTokens keeps the scheduling API's tokens of one account in the
// state store (scheduling.StateTokens). Callers: onrequest.go, dryrun.go,
// control's server.go.
type StateTokens = scheduling.StateTokens

// Scheduling is the open scheduling source of an account. Caller: app.go
// (Account.Scheduling).
type Scheduling = scheduling.Account
