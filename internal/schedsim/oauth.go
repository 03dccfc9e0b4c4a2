package schedsim

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// codeLifetime bounds how long an authorization code may wait for exchange.
const codeLifetime = 10 * time.Minute

// handleAuthorize auto-approves: it checks the request as the real page
// does and redirects to redirect_uri with code and state (or error and
// state). An unknown client or a redirect URI that is not registered cannot
// be redirected to, so those get a 400 page, as does a session cookie
// naming no user. The consenting user is the session's (see PathLogin),
// and the code, and every token from it, is bound to that user.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, ok := s.clients[q.Get("client_id")]
	if !ok {
		http.Error(w, "client_not_found: unknown client_id", http.StatusBadRequest)
		return
	}
	redirect := q.Get("redirect_uri")
	if !redirectAllowed(c, redirect) {
		http.Error(w, "redirect_uri_mismatch: redirect_uri is not registered for this client", http.StatusBadRequest)
		return
	}
	user, err := s.consentingUser(r)
	if err != nil {
		http.Error(w, "the session's user is unknown; sign in again at "+PathLogin+"?user=<username>", http.StatusBadRequest)
		return
	}
	fail := func(code, desc string) {
		u, _ := url.Parse(redirect)
		v := u.Query()
		v.Set("error", code)
		v.Set("error_description", desc)
		if st := q.Get("state"); st != "" {
			v.Set("state", st)
		}
		u.RawQuery = v.Encode()
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
	}
	s.mu.Lock()
	deny := s.deny
	s.mu.Unlock()
	if deny != "" {
		fail(deny, "the user did not allow access")
		return
	}
	scopes := splitScopes(q.Get("scope"))
	switch {
	case len(scopes) == 0 && !c.Legacy:
		fail("invalid_scope", "scope is required")
		return
	case !subset(scopes, c.Scopes):
		fail("invalid_scope", "scope must be a subset of the scopes enabled on the client")
		return
	}
	challenge := q.Get("code_challenge")
	if c.Public && (challenge == "" || q.Get("code_challenge_method") != "S256") {
		fail("invalid_request", "code_challenge with code_challenge_method S256 is required for public clients")
		return
	}
	if challenge != "" && q.Get("code_challenge_method") != "S256" {
		fail("invalid_request", "code_challenge_method must be S256")
		return
	}
	code := newSecret("sim_code_")
	s.mu.Lock()
	s.codes[code] = &grant{user: user, clientID: c.ID, scopes: scopes, challenge: challenge, redirect: redirect, expiry: s.cfg.Now().Add(codeLifetime)}
	s.stats.Authorizations++
	s.users[user].stats.Authorizations++
	s.mu.Unlock()
	u, _ := url.Parse(redirect)
	v := u.Query()
	v.Set("code", code)
	if st := q.Get("state"); st != "" {
		v.Set("state", st)
	}
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// redirectAllowed: a registered URI, or with none registered any loopback
// http URI (tests pick free ports).
func redirectAllowed(c *Client, redirect string) bool {
	u, err := url.Parse(redirect)
	if err != nil || redirect == "" {
		return false
	}
	var registered []string
	for _, r := range c.RedirectURIs {
		if r != "" {
			registered = append(registered, r)
		}
	}
	if len(registered) == 0 {
		h := u.Hostname()
		return u.Scheme == "http" && (h == "127.0.0.1" || h == "localhost" || h == "::1")
	}
	return slices.Contains(registered, redirect)
}

// splitScopes reads a space- or comma-separated scope list.
func splitScopes(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '+' })
	if len(f) == 0 {
		return nil
	}
	return f
}

func subset(a, of []string) bool {
	for _, x := range a {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}

// tokenError writes an RFC 6749 error.
func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// tokenParams reads a form-encoded or JSON body into one map.
func tokenParams(r *http.Request) (map[string]string, error) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	out := map[string]string{}
	switch mt {
	case "application/json":
		var m map[string]any
		if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<16)).Decode(&m); err != nil {
			return nil, fmt.Errorf("body is not a JSON object: %v", err)
		}
		for k, v := range m {
			if s, ok := v.(string); ok {
				out[k] = s
			}
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k := range r.PostForm {
			out[k] = r.PostForm.Get(k)
		}
	default:
		return nil, fmt.Errorf("Content-Type must be application/x-www-form-urlencoded or application/json")
	}
	return out, nil
}

func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	if s.fault(w, s.cfg.TokenFaultRate) {
		return
	}
	p, err := tokenParams(r)
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	c, ok := s.clients[p["client_id"]]
	if !ok {
		s.count(func(st *Stats) { st.InvalidClient++ })
		tokenError(w, http.StatusUnauthorized, "invalid_client", "client_id is unknown")
		return
	}
	secretIdx := 0
	if !c.Public {
		secretIdx = matchSecret(c.Secrets, p["client_secret"])
		if secretIdx == 0 {
			s.count(func(st *Stats) { st.InvalidClient++ })
			tokenError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	var g grant
	switch p["grant_type"] {
	case "authorization_code":
		code, ok := s.codes[p["code"]]
		if p["code"] == "" || p["redirect_uri"] == "" {
			tokenError(w, http.StatusBadRequest, "invalid_request", "code and redirect_uri are required")
			return
		}
		delete(s.codes, p["code"]) // single use, whatever happens next
		if !ok || code.clientID != c.ID || now.After(code.expiry) {
			tokenError(w, http.StatusBadRequest, "invalid_grant", "the authorization code is invalid, expired or already used")
			return
		}
		if code.redirect != p["redirect_uri"] {
			tokenError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri does not match the authorization request")
			return
		}
		if c.Public || code.challenge != "" {
			v := p["code_verifier"]
			if v == "" {
				tokenError(w, http.StatusBadRequest, "invalid_request", "code_verifier is required")
				return
			}
			sum := sha256.Sum256([]byte(v))
			if base64.RawURLEncoding.EncodeToString(sum[:]) != code.challenge {
				tokenError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match code_challenge")
				return
			}
		}
		g = *code
		s.stats.CodeExchanges++
	case "refresh_token":
		rt, ok := s.refresh[p["refresh_token"]]
		if p["refresh_token"] == "" {
			tokenError(w, http.StatusBadRequest, "invalid_request", "refresh_token is required")
			return
		}
		if !ok || rt.used || rt.clientID != c.ID {
			s.stats.RefusedRefresh++
			tokenError(w, http.StatusBadRequest, "invalid_grant", "the refresh token is invalid or already used")
			return
		}
		rt.used = true // rotation: the old one is refused from now on
		g = rt.grant
		s.stats.Refreshes++
	case "":
		tokenError(w, http.StatusBadRequest, "invalid_request", "grant_type is required")
		return
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
		return
	}
	if secretIdx > 0 {
		s.stats.SecretUsed[fmt.Sprintf("%s/%d", c.ID, secretIdx)]++
	}
	at, rt := newSecret("sim_at_"), newSecret("sim_rt_")
	ag := g
	ag.expiry = now.Add(s.cfg.TokenExpiry)
	s.access[at] = &ag
	s.refresh[rt] = &refreshState{grant: g}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token":  at,
		"token_type":    "bearer",
		"refresh_token": rt,
		"expires_in":    int64(s.cfg.TokenExpiry / time.Second),
	})
}

// matchSecret returns 1 or 2 for the secret that matches, 0 for none.
func matchSecret(secrets []string, got string) int {
	if got == "" {
		return 0
	}
	for i, sec := range secrets {
		if sec != "" && subtle.ConstantTimeCompare([]byte(sec), []byte(got)) == 1 {
			return i + 1
		}
	}
	return 0
}

// HasScope reports whether granted satisfies needed, ORG_ scopes covering
// the TEAM_ scope of the same suffix (oauth-permissions.guard.ts).
func HasScope(granted []string, needed string) bool {
	if slices.Contains(granted, needed) {
		return true
	}
	if rest, ok := strings.CutPrefix(needed, "TEAM_"); ok {
		return slices.Contains(granted, "ORG_"+rest)
	}
	return false
}

func (s *Server) count(f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.stats)
}
