package control

// The text of the sign-ins `syncd auth status` reads: what it says of each
// account's sign-in (what `auth login` says once one is saved is its
// source's, source.SignedIn). The commands keep the loop over the
// accounts, the count of bad ones and the exit code.

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// SchedulingStatus is what SignInStatus says of an account's sign-in to
// the scheduling API. In a configuration of several accounts (Multi), the
// text goes under "account NAME:" and the command to sign in again names
// the account.
type SchedulingStatus struct {
	Multi   bool
	Account string
	Token   oauth.Token
	Local   bool // read in the state only, beside a running syncd
	Err     error
}

// WriteText writes the sign-in as `syncd auth status` prints it; ok is
// false when the sign-in is missing, refused or could not be checked.
func (s SchedulingStatus) WriteText(w io.Writer, now time.Time) (ok bool) {
	login := "syncd auth login"
	if s.Multi {
		fmt.Fprintf(w, "account %s:", s.Account)
		login += " --account " + s.Account
	}
	var lr *oauth.LoginRequiredError
	sep := "" // after "account NAME:", a space before a one-line answer
	if s.Multi {
		sep = " "
	}
	switch {
	case errors.Is(s.Err, oauth.ErrNoToken):
		fmt.Fprintf(w, "%snot signed in: run `%s`\n", sep, login)
		return false
	case errors.As(s.Err, &lr):
		fmt.Fprintf(w, "%ssigned in as %s, but the token endpoint refused the sign-in (%s): run `%s`\n", sep, textfmt.OrDash(s.Token.User), lr.Reason, login)
		return false
	case s.Err != nil:
		fmt.Fprintf(w, "%scould not check the sign-in: %v\n", sep, s.Err)
		return false
	}
	desc := s.Token.Summary().Describe(now)
	if s.Multi {
		// The description's lines, under the account's.
		fmt.Fprintln(w)
		desc = "  " + strings.ReplaceAll(strings.TrimSuffix(desc, "\n"), "\n", "\n  ") + "\n"
	}
	fmt.Fprint(w, desc)
	if s.Local {
		fmt.Fprintln(w, "(checked in the state only: a running syncd holds it, and uses the sign-in itself)")
	}
	return true
}

// FormsStatus is what FormsSignIns.Check says of the Forms API sign-in of
// the account named Account.
type FormsStatus struct {
	Account string
	Token   formsauth.Token
	Err     error
}

// WriteText writes the sign-in as `syncd auth status --source forms`
// prints it; ok is false when the sign-in is missing or refused, or could
// not be checked.
func (s FormsStatus) WriteText(w io.Writer) (ok bool) {
	fmt.Fprintf(w, "account %s: ", s.Account)
	ae := app.AsSourceError(s.Err)
	switch {
	case errors.Is(s.Err, app.ErrNoSignIn):
		fmt.Fprintf(w, "not signed in to the Forms API: run `%s`\n", loginCommand(sourceForms, s.Account))
		return false
	case ae != nil && ae.Kind == app.SourceAuth:
		fmt.Fprintf(w, "signed in to the Forms API at %s, but it refuses the token (HTTP %d: invalidated?): run `%s`\n", s.Token.BaseURL, ae.Status, loginCommand(sourceForms, s.Account))
		return false
	case s.Err != nil:
		fmt.Fprintf(w, "could not check the Forms API sign-in: %v\n", s.Err)
		return false
	}
	fmt.Fprintf(w, "signed in to the Forms API at %s since %s (the token does not expire)\n", s.Token.BaseURL, s.Token.ObtainedAt.Format(time.RFC3339))
	return true
}

// loginCommand is the command that signs account in to the source named
// name again (source.Login's LoginCommand).
func loginCommand(name, account string) string {
	l, err := app.LoginSource(name)
	if err != nil {
		return "syncd auth login --account " + account + " --source " + name
	}
	return l.LoginCommand(account)
}
