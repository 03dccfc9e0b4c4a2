package forms

import (
	"errors"
	"fmt"
	"strings"

	"github.com/syncd-dev/syncd/internal/source"
)

// Sentinels matched with errors.Is by the typed errors below. They are
// immutable values: the typed errors carry the details.
var (
	ErrUnauthorized = errors.New("forms: API key rejected")
	ErrNotFound     = errors.New("forms: not found")
	ErrBadRequest   = errors.New("forms: request refused")
	ErrUnavailable  = errors.New("forms: service unavailable")
	ErrDecode       = errors.New("forms: undecodable response")
)

// AuthError is a 401 or 403: the key is wrong, revoked, or belongs to another
// deployment (base URL). Retrying cannot help.
type AuthError struct {
	BaseURL string
	Status  int
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("the Forms API at %s rejected the API key (HTTP %d): check source.api_key / FORMS_API_KEY and that the key belongs to this base URL (source.base_url)",
		e.BaseURL, e.Status)
}

// Is makes errors.Is(err, ErrUnauthorized) true.
func (e *AuthError) Is(target error) bool { return target == ErrUnauthorized }

// NotFoundError is a 404. What is "form", "submission", "webhook" or
// "endpoint" (the base URL itself looks wrong); ID names the missing thing.
type NotFoundError struct {
	What, ID string
	FormID   string // the form a missing submission was looked up in
	BaseURL  string
}

func (e *NotFoundError) Error() string {
	switch e.What {
	case "form":
		return fmt.Sprintf("form %s does not exist at %s: check the form id in forms[]", e.ID, e.BaseURL)
	case "submission":
		return fmt.Sprintf("submission %s of form %s does not exist at %s: it may have been deleted", e.ID, e.FormID, e.BaseURL)
	case "webhook":
		return fmt.Sprintf("webhook %s does not exist at %s: it may have been deleted already", e.ID, e.BaseURL)
	default:
		return fmt.Sprintf("%s does not exist at %s: check source.base_url", e.ID, e.BaseURL)
	}
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// BadRequestError is a 400 (or another 4xx that retrying cannot fix) with the
// server's message, when it sent one.
type BadRequestError struct {
	Endpoint string // e.g. "GET /forms/abc123/submissions"
	Message  string // the server's message, API key removed; may be empty
	Status   int
}

func (e *BadRequestError) Error() string {
	status := e.Status
	if status == 0 {
		status = 400
	}
	msg := e.Message
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("the Forms API refused %s (HTTP %d): %s", e.Endpoint, status, msg)
}

// Is makes errors.Is(err, ErrBadRequest) true.
func (e *BadRequestError) Is(target error) bool { return target == ErrBadRequest }

// UnavailableError means the service kept failing: the last answer was Status
// (0 for a network error, then Err says which) after Attempts attempts.
type UnavailableError struct {
	Endpoint string
	Status   int
	Attempts int
	Err      error
	// Uncertain is set when a create or delete was not retried because it may
	// have reached the server (a timeout or 5xx): check before repeating it.
	Uncertain bool
}

func (e *UnavailableError) Error() string {
	var b strings.Builder
	b.WriteString(e.Endpoint)
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " kept failing after %d attempts (last: ", e.Attempts)
	} else {
		b.WriteString(" failed (")
	}
	switch {
	case e.Status != 0 && e.Err != nil:
		fmt.Fprintf(&b, "HTTP %d: %v)", e.Status, e.Err)
	case e.Status != 0:
		fmt.Fprintf(&b, "HTTP %d)", e.Status)
	case e.Err != nil:
		fmt.Fprintf(&b, "%v)", e.Err)
	default:
		b.WriteString("unknown error)")
	}
	if e.Status == 429 {
		b.WriteString(": rate limited; another client may share this API key, or the configured rate limit is above the account's")
	}
	if e.Uncertain {
		b.WriteString(": the request may have been applied, check before repeating it")
	}
	return b.String()
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// DecodeError is a response that could not be read: malformed, truncated, of
// an unexpected shape, or larger than the client's MaxBodyBytes.
type DecodeError struct {
	Endpoint string
	Err      error
}

func (e *DecodeError) Error() string {
	var tl *bodyTooLargeError
	if errors.As(e.Err, &tl) {
		return fmt.Sprintf("response of %s exceeds the %d-byte cap (forms client MaxBodyBytes)", e.Endpoint, tl.limit)
	}
	return fmt.Sprintf("decode response of %s: %v", e.Endpoint, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDecode) true.
func (e *DecodeError) Is(target error) bool { return target == ErrDecode }

// bodyTooLargeError is the cause inside a DecodeError for an oversized body.
type bodyTooLargeError struct{ limit int64 }

func (e *bodyTooLargeError) Error() string {
	return fmt.Sprintf("body exceeds %d bytes", e.limit)
}

// name is the Forms API's name as a source (poller.SourceForms; this
// package does not import the engine).
const name = "forms"

// As makes errors.As(err, &*source.Error) find the key refused as a
// source's auth failure: the app decides on the kind, never on this type.
func (e *AuthError) As(target any) bool {
	p, ok := target.(**source.Error)
	if ok {
		*p = &source.Error{Kind: source.Auth, Source: name, Where: e.BaseURL, Status: e.Status, Err: e}
	}
	return ok
}

// As makes errors.As(err, &*source.Error) find what was missing as a
// source's not found.
func (e *NotFoundError) As(target any) bool {
	p, ok := target.(**source.Error)
	if ok {
		*p = &source.Error{Kind: source.NotFound, Source: name, What: e.What, ID: e.ID, Where: e.BaseURL, Status: 404, Err: e}
	}
	return ok
}

// As makes errors.As(err, &*source.Error) find a service that kept
// answering 429 as a source rate limited, and one that kept failing
// otherwise as unavailable.
func (e *UnavailableError) As(target any) bool {
	p, ok := target.(**source.Error)
	if ok {
		k := source.Unavailable
		if e.Status == 429 {
			k = source.RateLimited
		}
		*p = &source.Error{Kind: k, Source: name, Status: e.Status, Err: e}
	}
	return ok
}
