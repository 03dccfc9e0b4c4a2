package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Source is the Forms API account.
type Source struct {
	BaseURL     string   `yaml:"base_url"`
	APIKey      Secret   `yaml:"api_key"`
	RateLimit   float64  `yaml:"rate_limit"`
	MaxAttempts int      `yaml:"max_attempts"`
	Timeout     Duration `yaml:"timeout"`
}

// FormConfig selects one form and, optionally, its table and schedule.
type FormConfig struct {
	ID        string `yaml:"id"`
	Table     string `yaml:"table"`
	StartDate Date   `yaml:"start_date"`
	Schedule  string `yaml:"schedule"`
}

// FormsOAuth is the Forms API's OAuth app (a Fillout OAuth application)
// that accounts sign in with. Tokens are kept in the state store, never
// here; they do not expire, and the service may invalidate them.
type FormsOAuth struct {
	AuthorizeURL string `yaml:"authorize_url"`
	TokenURL     string `yaml:"token_url"`
	ClientID     string `yaml:"client_id"`
	ClientSecret Secret `yaml:"client_secret"`
	// RedirectURI is where `syncd auth login --source forms` waits for the
	// code: a loopback http URL registered with the app.
	RedirectURI string `yaml:"redirect_uri"`
}

// setDefaults fills what a forms_oauth section leaves out.
func (f *FormsOAuth) setDefaults() {
	d := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	d(&f.AuthorizeURL, "https://build.fillout.com/authorize/oauth")
	d(&f.TokenURL, "https://server.fillout.com/public/oauth/accessToken")
	d(&f.RedirectURI, "http://127.0.0.1:8977/callback")
}

// validate checks the forms_oauth section, when there is one; used tells
// whether an account signs in with it (the secret is needed then only, so
// that a section prepared ahead of its secret still loads).
func (f *FormsOAuth) validate(used bool, bad func(key, msg string) error) error {
	if f == nil {
		return nil
	}
	for _, u := range []struct{ key, v string }{{"forms_oauth.authorize_url", f.AuthorizeURL}, {"forms_oauth.token_url", f.TokenURL}} {
		if !isHTTPURL(u.v) {
			return bad(u.key, fmt.Sprintf("%q is not an http(s) URL: leave it out to use Fillout's", u.v))
		}
	}
	if strings.TrimSpace(f.ClientID) == "" {
		return bad("forms_oauth.client_id", "is empty: set the OAuth app's client id (e.g. ${FORMS_CLIENT_ID})")
	}
	if used && f.ClientSecret == "" {
		return bad("forms_oauth.client_secret", "is empty: set the OAuth app's client secret from the environment (e.g. ${FORMS_CLIENT_SECRET})")
	}
	if p, err := url.Parse(f.RedirectURI); err != nil || p.Scheme != "http" || !isLoopback(p.Hostname()) || p.Port() == "" {
		return bad("forms_oauth.redirect_uri", fmt.Sprintf("%q is not a loopback http URL with a port (e.g. http://127.0.0.1:8977/callback): `syncd auth login --source forms` listens there for the code", f.RedirectURI))
	}
	return nil
}
