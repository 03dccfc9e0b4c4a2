// Package connect is the connect page of `syncd run` (issue 22, many
// accounts): the user of one account of an agency or platform signs in to
// the scheduling API themselves, and syncd stores that account's tokens.
//
// The operator hands the user a link, /connect?account=NAME&token=T, whose
// guard token T is Token(secret, NAME): it opens the connect page of NAME and
// of no other account, and checking it needs nothing stored. The page sends
// the browser to the scheduling API's authorization page with a fresh state
// (and a PKCE verifier for a public client); the API sends it back to
// /connect/callback, which takes the pending request out (single use, so a
// replayed redirect is refused before the code reaches the token endpoint),
// exchanges the code and saves the token for the account.
//
// The pending request is also bound to the browser that opened the link, by
// a cookie: without it, whoever holds an account's link could start a
// sign-in and have someone else consent, storing that person's calendar
// under the account.
//
// Secrets (codes, verifiers, tokens, the guard token) never appear in a
// page, a log line or an error.
package connect

import (
	"container/list"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/oauth"
)

// Paths the handler serves.
const (
	PathConnect  = "/connect"
	PathCallback = "/connect/callback"
)

// Defaults of Options.
const (
	DefaultTTL        = 10 * time.Minute
	DefaultMaxPending = 1000
)

// cookieName holds the browser's binding nonce; its path covers both pages.
const cookieName = "syncd_connect"

// exchangeTimeout bounds the exchange and the save after a callback. They
// run on past a browser that goes away: the code is spent either way, and
// tokens received but not saved would be a sign-in lost.
const exchangeTimeout = 2 * time.Minute

// Token returns the guard token of account: HMAC-SHA256 under secret of
// "syncd connect\n" followed by the account name, base64url without padding.
// The label keeps a token from being valid for any other use of the secret.
func Token(secret []byte, account string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("syncd connect\n"))
	m.Write([]byte(account))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validToken checks token against account's in constant time.
func validToken(secret []byte, account, token string) bool {
	return subtle.ConstantTimeCompare([]byte(Token(secret, account)), []byte(token)) == 1
}

// Options configure a Handler.
type Options struct {
	// Secret signs the guard tokens (Token); at least 16 bytes.
	Secret []byte
	// Known reports whether account exists and signs in to the scheduling
	// API. It is asked on every request, as a config reload may change it.
	Known func(account string) bool
	// OAuth returns the OAuth client that account signs in with, its
	// RedirectURI the daemon's public URL + PathCallback. It is asked when a
	// sign-in starts; the callback exchanges with the same client.
	OAuth func(account string) (*oauth.Client, error)
	// Save stores account's token durably.
	Save func(ctx context.Context, account string, tok oauth.Token) error
	// Now is the clock of pending requests; default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
	// TTL is how long a sign-in may take, from the link to the callback;
	// default DefaultTTL.
	TTL time.Duration
	// MaxPending bounds the sign-ins in flight; past it the oldest is
	// dropped. Default DefaultMaxPending.
	MaxPending int
}

// Handler serves PathConnect and PathCallback. Safe for concurrent use.
type Handler struct {
	opts Options
	log  *zap.Logger

	mu      sync.Mutex
	pending map[string]*list.Element // by state
	order   *list.List               // of *pending, oldest first
}

// pending is a sign-in between the link and the callback.
type pending struct {
	state    string
	account  string
	verifier string // PKCE verifier; secret
	browser  string // the cookie nonce of the browser that opened the link
	client   *oauth.Client
	created  time.Time
}

// New checks opts and returns a Handler.
func New(opts Options) (*Handler, error) {
	switch {
	case len(opts.Secret) < 16:
		return nil, errors.New("connect: the secret must be at least 16 bytes")
	case opts.Known == nil:
		return nil, errors.New("connect: Options.Known is required")
	case opts.OAuth == nil:
		return nil, errors.New("connect: Options.OAuth is required")
	case opts.Save == nil:
		return nil, errors.New("connect: Options.Save is required")
	case opts.TTL < 0 || opts.MaxPending < 0:
		return nil, errors.New("connect: TTL and MaxPending must not be negative")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxPending == 0 {
		opts.MaxPending = DefaultMaxPending
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Handler{opts: opts, log: log, pending: make(map[string]*list.Element), order: list.New()}, nil
}

// Register mounts the handler on mux at PathConnect and PathCallback.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.Handle(PathConnect, h)
	mux.Handle(PathCallback, h)
}

// ServeHTTP serves the connect page and its callback.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		page(w, http.StatusMethodNotAllowed, "Only GET is served here.")
		return
	}
	switch r.URL.Path {
	case PathConnect:
		h.connect(w, r)
	case PathCallback:
		h.callback(w, r)
	default:
		page(w, http.StatusNotFound, "Not found.")
	}
}

// connect checks the link and sends the browser to the authorization page.
func (h *Handler) connect(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	account := q.Get("account")
	if account == "" {
		page(w, http.StatusBadRequest, "The link names no account: ask your operator for your connect link.")
		return
	}
	// The token is checked before the account is looked up, so that the
	// page does not tell strangers which accounts exist.
	if !validToken(h.opts.Secret, account, q.Get("token")) {
		h.log.Warn("connect link refused: the guard token is missing or not this account's", zap.String(logkey.Account, account))
		page(w, http.StatusForbidden, "This link is not valid for account %s: ask your operator for your connect link.", account)
		return
	}
	if !h.opts.Known(account) {
		h.log.Warn("connect link refused: the account is not configured to sign in to the scheduling API", zap.String(logkey.Account, account))
		page(w, http.StatusNotFound, "Account %s does not sign in to the scheduling API here: ask your operator.", account)
		return
	}
	client, err := h.opts.OAuth(account)
	if err != nil {
		h.log.Error("connect: no OAuth client for the account", zap.String(logkey.Account, account), zap.Error(err))
		page(w, http.StatusInternalServerError, "syncd cannot sign in account %s now: the operator's settings are at fault.", account)
		return
	}
	ar, err := client.NewAuthRequest()
	if err != nil {
		h.log.Error("connect: build the authorization request", zap.String(logkey.Account, account), zap.Error(err))
		page(w, http.StatusInternalServerError, "syncd cannot sign in account %s now.", account)
		return
	}
	browser := cookieNonce(r)
	if browser == "" {
		browser = randomNonce()
	}
	h.add(&pending{state: ar.State, account: account, verifier: ar.Verifier, browser: browser, client: client, created: h.opts.Now()})
	http.SetCookie(w, &http.Cookie{
		Name:     cookieName,
		Value:    browser,
		Path:     cookiePath(client.Config().RedirectURI),
		MaxAge:   int(h.opts.TTL / time.Second),
		HttpOnly: true,
		Secure:   strings.HasPrefix(client.Config().RedirectURI, "https:"),
		// Lax: the callback is a top-level GET from the API's site.
		SameSite: http.SameSiteLaxMode,
	})
	h.log.Info("connect: sending the user to the scheduling API's authorization page", zap.String(logkey.Account, account))
	noStore(w)
	http.Redirect(w, r, ar.URL, http.StatusFound)
}

// callback takes the pending request of the redirect's state out, then
// exchanges the code and saves the token.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := h.take(q.Get("state"))
	if p == nil {
		h.log.Warn("connect callback refused: its state is unknown, expired or already used")
		page(w, http.StatusBadRequest, "This sign-in is unknown, expired or already finished: open your connect link again.")
		return
	}
	log := h.log.With(zap.String(logkey.Account, p.account))
	if subtle.ConstantTimeCompare([]byte(cookieNonce(r)), []byte(p.browser)) != 1 {
		log.Warn("connect callback refused: it comes from another browser than the one that opened the connect link")
		page(w, http.StatusBadRequest, "This sign-in was started in another browser: open your connect link again in this one.")
		return
	}
	if e := q.Get("error"); e != "" {
		code := errorCode(e)
		log.Warn("connect: the scheduling API did not authorize", zap.String(logkey.Error, code))
		if code == "access_denied" {
			page(w, http.StatusForbidden, "Account %s is not connected: consent was refused at the scheduling API. Open your connect link again to retry.", p.account)
			return
		}
		page(w, http.StatusBadRequest, "Account %s is not connected: the scheduling API answered %s. Ask your operator.", p.account, code)
		return
	}
	code := q.Get("code")
	if code == "" {
		log.Warn("connect callback refused: it has no code")
		page(w, http.StatusBadRequest, "Account %s is not connected: the scheduling API sent no authorization code. Open your connect link again.", p.account)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), exchangeTimeout)
	defer cancel()
	tok, err := p.client.Exchange(ctx, code, p.verifier)
	if err != nil {
		// oauth's errors carry no secret (it scrubs the code and verifier).
		log.Warn("connect: the code exchange failed", zap.Error(err))
		var te *oauth.TokenEndpointError
		if errors.As(err, &te) && te.Code == "invalid_grant" {
			page(w, http.StatusBadRequest, "Account %s is not connected: the scheduling API refused the authorization (expired or already used). Open your connect link again.", p.account)
			return
		}
		page(w, http.StatusBadGateway, "Account %s is not connected: syncd could not complete the sign-in with the scheduling API. Try again later.", p.account)
		return
	}
	if err := h.opts.Save(ctx, p.account, tok); err != nil {
		log.Error("connect: store the account's token", zap.Error(err))
		page(w, http.StatusInternalServerError, "Account %s is not connected: syncd could not store the sign-in. Ask your operator.", p.account)
		return
	}
	log.Info("connect: account connected", zap.Strings(logkey.Scopes, tok.Scopes))
	page(w, http.StatusOK, "syncd: account %s is connected. You can close this tab.", p.account)
}

// add remembers p, dropping expired requests and, past the bound, the
// oldest.
func (h *Handler) add(p *pending) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweep(p.created)
	for h.order.Len() >= h.opts.MaxPending {
		h.remove(h.order.Front())
	}
	h.pending[p.state] = h.order.PushBack(p)
}

// take removes and returns the live pending request of state, or nil.
func (h *Handler) take(state string) *pending {
	if state == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.opts.Now()
	h.sweep(now)
	e, ok := h.pending[state]
	if !ok {
		return nil
	}
	// Taken out even if expired: sweep stops at the first live request, so
	// one created before a clock was set back may still be here.
	p := h.remove(e)
	if now.Sub(p.created) > h.opts.TTL {
		return nil
	}
	return p
}

// sweep drops the requests older than the TTL; they are in creation order.
// Callers hold mu.
func (h *Handler) sweep(now time.Time) {
	for e := h.order.Front(); e != nil; e = h.order.Front() {
		if now.Sub(e.Value.(*pending).created) <= h.opts.TTL {
			return
		}
		h.remove(e)
	}
}

// remove drops e. Callers hold mu.
func (h *Handler) remove(e *list.Element) *pending {
	p := h.order.Remove(e).(*pending)
	delete(h.pending, p.state)
	return p
}

// Pending returns how many sign-ins are in flight, for status pages and
// tests.
func (h *Handler) Pending() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.order.Len()
}

// cookieNonce is the browser's nonce, or "" if it sent none of the right
// shape.
func cookieNonce(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	if b, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil || len(b) != 32 {
		return ""
	}
	return c.Value
}

// cookiePath is the path the browser reaches the connect pages under: the
// directory of the redirect URI's PathCallback, so that behind a reverse
// proxy serving syncd under a prefix (public_url https://host/syncd) the
// cookie is sent to /syncd/connect/callback; PathConnect without a prefix.
func cookiePath(redirectURI string) string {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return PathConnect
	}
	p := u.EscapedPath()
	if !strings.HasSuffix(p, PathCallback) {
		return PathConnect
	}
	return strings.TrimSuffix(p, PathCallback) + PathConnect
}

func randomNonce() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// errorCode keeps an error= value shown and logged to an RFC 6749 code's
// characters and length: it comes from the query, which anyone can write.
func errorCode(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	ok := func(r rune) bool {
		return r == '_' || r == '-' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	}
	if strings.IndexFunc(s, func(r rune) bool { return !ok(r) }) >= 0 {
		return "an unknown error"
	}
	return s
}

// page answers with a short plain-text page: nothing in it is markup, so an
// account name from the query cannot inject any.
func page(w http.ResponseWriter, status int, format string, args ...any) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	noStore(w)
	w.WriteHeader(status)
	fmt.Fprintf(w, format+"\n", args...)
}

// noStore keeps the pages and redirects, which carry states and codes in
// their URLs, out of caches and referrers.
func noStore(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
}
