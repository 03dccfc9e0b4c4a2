package forms

import (
	"errors"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/internal/source"
)

// Login is the command that signs account in to the Forms API.
func Login(account string) string {
	return "syncd auth login --account " + account + " --source forms"
}

// KeyError is an account's Forms API key refused (revoked, or of another
// deployment): that account stops, the others sync.
type KeyError struct {
	Account string
	Err     *source.Error // of kind source.Auth
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("account %s: the Forms API at %s rejected its key (HTTP %d): check the account's api_key (or api_key_file) and that the key belongs to its base_url; the other accounts sync",
		e.Account, e.Err.Where, e.Err.Status)
}

func (e *KeyError) Unwrap() error { return e.Err }

// SignInError is an account with forms_oauth whose pass cannot run: not
// signed in, or its token refused (invalidated). It names the command
// that fixes it; the other accounts sync.
type SignInError struct {
	Account string
	// Err is ErrNoSignIn, the source's auth failure (*source.Error of
	// kind source.Auth), or what reading the sign-in failed with.
	Err error
}

func (e *SignInError) Error() string {
	ae := source.AsError(e.Err)
	switch {
	case errors.Is(e.Err, ErrNoSignIn):
		return fmt.Sprintf("account %s has not signed in to the Forms API: run `%s`; the other accounts sync", e.Account, Login(e.Account))
	case ae != nil && ae.Kind == source.Auth:
		return fmt.Sprintf("account %s: the Forms API at %s no longer accepts its OAuth sign-in (HTTP %d: invalidated, or the app was removed): run `%s`; the other accounts sync",
			e.Account, ae.Where, ae.Status, Login(e.Account))
	}
	return fmt.Sprintf("account %s: %v: run `%s`", e.Account, e.Err, Login(e.Account))
}

func (e *SignInError) Unwrap() error { return e.Err }

// MissingFormError is a configured form the account does not have.
type MissingFormError struct {
	Form string
	Hint string // " (closest: a, b)" or ""
	Err  error  // the source's not found (*source.Error)
}

func (e *MissingFormError) Error() string {
	return fmt.Sprintf("form %s does not exist in the account%s: it was deleted, or its id in forms[] is mistyped; fix or remove it in forms[] (what was synced of it stays in the output and the state); the other forms sync", e.Form, e.Hint)
}

func (e *MissingFormError) Unwrap() error { return e.Err }

// UnknownFormError names form ids the account does not have, with the ids
// closest to each.
type UnknownFormError struct {
	IDs  []string
	Hint []string // per id: "closest: a, b" or ""
}

func (e *UnknownFormError) Error() string {
	var b strings.Builder
	for i, id := range e.IDs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "form %s does not exist in this account", id)
		if e.Hint[i] != "" {
			b.WriteString(" (" + e.Hint[i] + ")")
		}
	}
	b.WriteString(": check the id with `syncd forms`; nothing was written")
	return b.String()
}

// Is makes errors.Is(err, source.ErrBadID) true: the command named a form
// the account does not have.
func (e *UnknownFormError) Is(target error) bool { return target == source.ErrBadID }
