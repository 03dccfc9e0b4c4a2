package source

import (
	"errors"
	"fmt"
)

// Kind is what went wrong at a source, in the contract's terms: what the
// app decides on (stop one account, name the closest id, wait) never
// depends on which source failed.
type Kind int

// The kinds of a source's failures the app tells apart.
const (
	// Auth: the source refused the account's credentials (a key revoked,
	// a sign-in expired). Retrying cannot help; the account's user must.
	Auth Kind = iota + 1
	// NotFound: what the configuration names (a form, a calendar) does not
	// exist at the source.
	NotFound
	// RateLimited: the source said to slow down, and retrying as told
	// did not get through.
	RateLimited
	// Unavailable: the service kept failing (5xx, no answer) through the
	// retries; the next pass tries again.
	Unavailable
)

// Sentinels matched with errors.Is by an *Error of their kind. A source's
// own typed error turns into an *Error through errors.As (AsError, Is):
// errors.Is on it alone does not see the kind.
var (
	ErrAuth        = errors.New("source: credentials refused")
	ErrNotFound    = errors.New("source: not found")
	ErrRateLimited = errors.New("source: rate limited")
	ErrUnavailable = errors.New("source: unavailable")
)

func (k Kind) String() string {
	switch k {
	case Auth:
		return "auth"
	case NotFound:
		return "not found"
	case RateLimited:
		return "rate limited"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("kind %d", int(k))
}

func (k Kind) sentinel() error {
	switch k {
	case Auth:
		return ErrAuth
	case NotFound:
		return ErrNotFound
	case RateLimited:
		return ErrRateLimited
	case Unavailable:
		return ErrUnavailable
	}
	return nil
}

// Error is a source's failure as the contract types it. A source's own
// typed error either is one, or turns into one with errors.As (it has an
// As method): the message stays the source's own, which says what to do.
type Error struct {
	Kind Kind
	// Source names the source ("forms", "scheduling").
	Source string
	// What and ID name what was not found ("form", "vLp2aX"); empty for
	// another kind.
	What, ID string
	// Where is the endpoint the source answered at (its base URL), and
	// Status the HTTP status it answered with (0: none), for messages.
	Where  string
	Status int
	// Err is the source's own error.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %s", e.Source, e.Kind)
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrAuth) (and the other sentinels) true for an
// Error of that kind.
func (e *Error) Is(target error) bool {
	s := e.Kind.sentinel()
	return s != nil && target == s
}

// AsError is err's *Error, when it is or wraps a source's failure of a
// kind the contract knows; nil otherwise.
func AsError(err error) *Error {
	var se *Error
	if errors.As(err, &se) {
		return se
	}
	return nil
}

// Is reports whether err is a source's failure of kind k.
func Is(err error, k Kind) bool {
	se := AsError(err)
	return se != nil && se.Kind == k
}

// IsNotFound reports whether err says that what of id does not exist at
// the source (a configured form deleted since, or mistyped).
func IsNotFound(err error, what, id string) bool {
	se := AsError(err)
	return se != nil && se.Kind == NotFound && se.What == what && se.ID == id
}
