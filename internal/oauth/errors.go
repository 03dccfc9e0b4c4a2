package oauth

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Sentinels matched with errors.Is by the typed errors below.
var (
	ErrLoginRequired = errors.New("oauth: login required")
	ErrScope         = errors.New("oauth: scope missing")
	ErrAuthorization = errors.New("oauth: authorization refused")
	// ErrNoToken is what a TokenStore's Load returns (wrapped or not) when
	// no token was ever stored.
	ErrNoToken = errors.New("oauth: no token stored")
)

// LoginRequiredError means the stored authorization can no longer be used:
// the refresh token was refused (invalid_grant: revoked, expired or already
// used) or none is stored. Only a new login helps; the source must stop.
type LoginRequiredError struct {
	ClientID string
	Reason   string // what the server said, secrets removed
}

func (e *LoginRequiredError) Error() string {
	return fmt.Sprintf("the scheduling API no longer accepts syncd's authorization for OAuth client %s (%s): run `syncd auth login` again",
		e.ClientID, e.Reason)
}

// Is makes errors.Is(err, ErrLoginRequired) true.
func (e *LoginRequiredError) Is(target error) bool { return target == ErrLoginRequired }

// TokenEndpointError is a refusal of the token endpoint other than a refused
// refresh token (which is a LoginRequiredError).
type TokenEndpointError struct {
	Op          string // "exchange" or "refresh"
	Status      int
	Code        string // RFC 6749 error code, e.g. invalid_client
	Description string // secrets removed
	BothSecrets bool   // invalid_client with each of the two secrets
}

// Summary is the code and description in one phrase.
func (e *TokenEndpointError) Summary() string {
	s := e.Code
	if s == "" {
		s = fmt.Sprintf("HTTP %d", e.Status)
	}
	if e.Description != "" && e.Description != e.Code {
		s += ": " + e.Description
	}
	return s
}

func (e *TokenEndpointError) Error() string {
	var fix string
	switch e.Code {
	case "invalid_client":
		fix = "check scheduling.client_id and scheduling.client_secret (and client_secret_next during a rotation) against the OAuth client's developer settings"
	case "invalid_grant":
		fix = "the authorization code expired or was already used: run `syncd auth login` again"
	case "invalid_scope":
		fix = "request only scopes enabled on the OAuth client (scheduling.scopes)"
	case "unauthorized_client":
		fix = "the OAuth client may still await review or lack this grant type: check it in the developer settings"
	default:
		if e.Status >= 500 || e.Status == 429 {
			fix = "the service is unavailable: try again later"
		} else {
			fix = "check the scheduling settings (token_url, redirect_uri, public)"
		}
	}
	return fmt.Sprintf("the scheduling API token endpoint refused the %s (HTTP %d, %s): %s", e.Op, e.Status, e.Summary(), fix)
}

// AuthorizationError is an error= redirect from the authorization page, or a
// redirect that cannot be trusted (state mismatch) or used (no code).
type AuthorizationError struct {
	Code        string // e.g. access_denied, invalid_scope, state_mismatch
	Description string
}

func (e *AuthorizationError) Error() string {
	var fix string
	switch e.Code {
	case "access_denied":
		fix = "approve the request on the authorization page"
	case "invalid_scope":
		fix = "request only scopes enabled on the OAuth client (scheduling.scopes)"
	case "state_mismatch":
		fix = "the redirect belongs to another login attempt (an old tab?) or was forged; use the newest URL"
	case "no_code":
		fix = "paste the whole URL the browser was redirected to"
	default:
		fix = "check the OAuth client's scopes and redirect URIs"
	}
	d := ""
	if e.Description != "" {
		d = " (" + terminalSafe(e.Description) + ")"
	}
	return fmt.Sprintf("authorization failed: %s%s: %s, then run `syncd auth login` again", terminalSafe(e.Code), d, fix)
}

// maxShownRedirectText bounds what an error shows of a redirect's text.
const maxShownRedirectText = 200

// terminalSafe is text from a redirect URL (anyone can craft one) as an
// error may show it: control characters (terminal escapes, new lines that
// would fake further output) become '?', and it is cut to
// maxShownRedirectText runes.
func terminalSafe(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxShownRedirectText {
			b.WriteString("…")
			break
		}
		if !unicode.IsPrint(r) {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// Is makes errors.Is(err, ErrAuthorization) true.
func (e *AuthorizationError) Is(target error) bool { return target == ErrAuthorization }

// ScopeError is a 403 for a missing scope: it names the scope the call needs
// and those the token has.
type ScopeError struct {
	Endpoint string   // e.g. "GET /v2/bookings"
	Needed   string   // e.g. BOOKING_READ
	Granted  []string // the token's scopes
}

func (e *ScopeError) Error() string {
	has := "no scope"
	if len(e.Granted) > 0 {
		has = strings.Join(e.Granted, ", ")
	}
	return fmt.Sprintf("%s needs the scope %s, but the token has only %s: enable %s on the OAuth client, add it to scheduling.scopes and run `syncd auth login` again",
		e.Endpoint, e.Needed, has, e.Needed)
}

// Is makes errors.Is(err, ErrScope) true.
func (e *ScopeError) Is(target error) bool { return target == ErrScope }
