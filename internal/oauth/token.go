package oauth

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// Token is one authorization: the token pair and what `auth status` shows
// about it. It is what a TokenStore keeps, so its JSON form holds the
// secrets (the store is the one place they belong); every printed form
// redacts them.
type Token struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry"`    // of the access token
	IssuedAt     time.Time `json:"issued_at"` // when this pair was received
	ClientID     string    `json:"client_id"`
	// Scopes granted; empty for a legacy (unscoped) token.
	Scopes []string `json:"scopes,omitempty"`
	Legacy bool     `json:"legacy,omitempty"`
	// User and UserID come from GET /v2/me at login.
	User   string `json:"user,omitempty"`
	UserID int64  `json:"user_id,omitempty"`
	// CodeVerifier is kept for public clients, whose refreshes may be asked
	// for it.
	CodeVerifier string `json:"code_verifier,omitempty"`
}

// TokenStore keeps the token durably (syncd's state store, beside the
// checkpoints). Save must be durable when it returns: a rotated refresh
// token saved to a cache that a crash loses is a session lost.
type TokenStore interface {
	// Load returns the stored token, or an error wrapping ErrNoToken.
	Load(ctx context.Context) (Token, error)
	Save(ctx context.Context, t Token) error
}

// Fresh reports whether the access token is usable at now for at least
// skew. The skew is capped at half the token's lifetime, so a service that
// issues short-lived tokens is not asked for a new one on every call.
func (t Token) Fresh(now time.Time, skew time.Duration) bool {
	if life := t.Expiry.Sub(t.IssuedAt); !t.IssuedAt.IsZero() && life > 0 {
		skew = min(skew, life/2)
	}
	return t.AccessToken != "" && now.Add(skew).Before(t.Expiry)
}

// Summary is what may be shown of a token: never a secret.
type Summary struct {
	ClientID string
	User     string
	UserID   int64
	Scopes   []string
	Legacy   bool
	Expiry   time.Time
	IssuedAt time.Time
}

// Summary returns the token's printable facts.
func (t Token) Summary() Summary {
	return Summary{ClientID: t.ClientID, User: t.User, UserID: t.UserID, Scopes: t.Scopes, Legacy: t.Legacy, Expiry: t.Expiry, IssuedAt: t.IssuedAt}
}

// Describe renders the summary as `auth status` prints it.
func (s Summary) Describe(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "client:  %s\n", s.ClientID)
	fmt.Fprintf(&b, "user:    %s (id %d)\n", s.User, s.UserID)
	if s.Legacy {
		b.WriteString("scopes:  none (legacy client: the token reaches every resource of the user)\n")
		b.WriteString("note:    " + LegacyMigrationStep + "\n")
	} else {
		fmt.Fprintf(&b, "scopes:  %s\n", strings.Join(s.Scopes, " "))
	}
	state := "valid"
	if !now.Before(s.Expiry) {
		state = "expired; the next sync refreshes it"
	}
	fmt.Fprintf(&b, "access:  expires %s (%s)\n", s.Expiry.UTC().Format(time.RFC3339), state)
	return b.String()
}

// String keeps the secrets out of anything that prints a Token.
func (t Token) String() string {
	return fmt.Sprintf("oauth.Token{AccessToken: %s, RefreshToken: %s, Expiry: %s, ClientID: %q, User: %q, Scopes: %q, Legacy: %t}",
		redactedIf(t.AccessToken), redactedIf(t.RefreshToken), t.Expiry.UTC().Format(time.RFC3339), t.ClientID, t.User, t.Scopes, t.Legacy)
}

// Format makes every fmt verb (%v, %+v, %#v...) print String.
func (t Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, t.String()) }

// MarshalLogObject keeps the secrets out of zap.Any(token).
func (t Token) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("access_token", redactedIf(t.AccessToken))
	enc.AddString("refresh_token", redactedIf(t.RefreshToken))
	enc.AddTime("expiry", t.Expiry)
	enc.AddString("client_id", t.ClientID)
	enc.AddString("user", t.User)
	enc.AddString("scopes", strings.Join(t.Scopes, " "))
	enc.AddBool("legacy", t.Legacy)
	return nil
}
