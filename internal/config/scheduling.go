package config

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Scheduling is the scheduling API and the OAuth client syncd signs in
// with. Tokens are kept in the state store, never here.
type Scheduling struct {
	BaseURL      string `yaml:"base_url"`
	AuthorizeURL string `yaml:"authorize_url"`
	ClientID     string `yaml:"client_id"`
	// ClientSecret is empty for a public client, which signs in with PKCE.
	ClientSecret Secret `yaml:"client_secret"`
	// ClientSecretNext is the second secret during a rotation: either one
	// is tried when the other is refused, and the log says which works.
	ClientSecretNext Secret `yaml:"client_secret_next"`
	// RedirectURI is where `syncd auth login` waits for the code: a
	// loopback http URL registered with the client.
	RedirectURI string `yaml:"redirect_uri"`
	// Scopes asked for; empty for a legacy client (no scope parameter).
	Scopes      []string `yaml:"scopes"`
	RateLimit   float64  `yaml:"rate_limit"`
	MaxAttempts int      `yaml:"max_attempts"`
	Timeout     Duration `yaml:"timeout"`
	Bookings    Bookings `yaml:"bookings"`
}

// Bookings is the bookings stream.
type Bookings struct {
	Table     string `yaml:"table"`
	StartDate Date   `yaml:"start_date"` // the earliest change synced; zero: all of them
}

// setDefaults fills what a scheduling section leaves out.
func (s *Scheduling) setDefaults() {
	d := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	d(&s.BaseURL, "https://api.cal.com")
	d(&s.AuthorizeURL, "https://app.cal.com/auth/oauth2/authorize")
	d(&s.RedirectURI, "http://127.0.0.1:8976/callback")
	d(&s.Bookings.Table, "bookings")
	if s.Scopes == nil {
		s.Scopes = []string{"BOOKING_READ", "PROFILE_READ"}
	}
	if s.RateLimit == 0 {
		s.RateLimit = 2
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = 6
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(15 * time.Second)
	}
}

// validate checks the scheduling section, when there is one.
func (s *Scheduling) validate(bad func(key, msg string) error) error {
	if s == nil {
		return nil
	}
	for _, u := range []struct{ key, v string }{{"scheduling.base_url", s.BaseURL}, {"scheduling.authorize_url", s.AuthorizeURL}} {
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return bad(u.key, fmt.Sprintf("%q is not an http(s) URL", u.v))
		}
	}
	if strings.TrimSpace(s.ClientID) == "" {
		return bad("scheduling.client_id", "is empty: set the OAuth client's id (e.g. ${SCHEDULING_CLIENT_ID})")
	}
	if s.ClientSecretNext != "" && s.ClientSecret == "" {
		return bad("scheduling.client_secret_next", "is set without client_secret: a public client has no secret to rotate")
	}
	if p, err := url.Parse(s.RedirectURI); err != nil || p.Scheme != "http" || !isLoopback(p.Hostname()) || p.Port() == "" {
		return bad("scheduling.redirect_uri", fmt.Sprintf("%q is not a loopback http URL with a port (e.g. http://127.0.0.1:8976/callback): `syncd auth login` listens there for the code", s.RedirectURI))
	}
	for i, sc := range s.Scopes {
		if !scopeName.MatchString(sc) {
			return bad(fmt.Sprintf("scheduling.scopes[%d]", i), fmt.Sprintf("%q is not a scope name like BOOKING_READ", sc))
		}
	}
	if !positiveFinite(s.RateLimit) {
		return bad("scheduling.rate_limit", fmt.Sprintf("must be a positive number of requests per second (default 2), not %v", s.RateLimit))
	}
	if s.MaxAttempts < 1 {
		return bad("scheduling.max_attempts", "must be at least 1")
	}
	if s.Timeout <= 0 {
		return bad("scheduling.timeout", "must be a positive duration, e.g. 60s")
	}
	if !tableName.MatchString(s.Bookings.Table) {
		return bad("scheduling.bookings.table", fmt.Sprintf("%q is not a valid table name: use letters, digits and _", s.Bookings.Table))
	}
	return nil
}

var scopeName = regexp.MustCompile(`^[A-Z][A-Z_]*$`)
