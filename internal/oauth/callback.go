package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Receiver waits on the loopback address of the redirect URI for the
// browser to come back from the authorization page.
type Receiver struct {
	ln      net.Listener
	srv     *http.Server
	path    string
	uri     string
	results chan url.Values
}

// Listen binds the host and port of redirectURI, which must be an http URI
// on a loopback address (127.0.0.1, ::1 or localhost); port 0 picks a free
// port (then RedirectURI reports it, for tests: a real client registers a
// fixed one).
func Listen(redirectURI string) (*Receiver, error) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return nil, fmt.Errorf("oauth: redirect URI %q is not a URL", redirectURI)
	}
	host := u.Hostname()
	loop := host == "localhost"
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		loop = true
	}
	if u.Scheme != "http" || !loop || u.Port() == "" {
		return nil, fmt.Errorf("oauth: redirect URI %q is not an http://127.0.0.1:PORT/... address syncd can listen on: register one on the OAuth client, or use `syncd auth login --no-browser`", redirectURI)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return nil, fmt.Errorf("oauth: listen on %s for the redirect: %w (is another login running?)", u.Host, err)
	}
	r := &Receiver{ln: ln, path: u.EscapedPath(), results: make(chan url.Values, 1)}
	if r.path == "" {
		r.path = "/"
	}
	if u.Port() == "0" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		u.Host = net.JoinHostPort(host, port)
	}
	r.uri = u.String()
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// RedirectURI is the URI the receiver answers on.
func (r *Receiver) RedirectURI() string { return r.uri }

// ServeHTTP takes the first redirect and answers the browser with a short
// page; later ones (a reload) get the page too but are ignored.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.EscapedPath() != r.path {
		http.NotFound(w, req)
		return
	}
	q := req.URL.Query()
	select {
	case r.results <- q:
	default:
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if e := q.Get("error"); e != "" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<!doctype html><title>syncd</title><p>syncd was not authorized: %s. Go back to the terminal.</p>", html.EscapeString(e))
		return
	}
	fmt.Fprint(w, "<!doctype html><title>syncd</title><p>syncd is signed in. You can close this tab.</p>")
}

// Wait returns the code of the first redirect, checked against state.
func (r *Receiver) Wait(ctx context.Context, state string) (string, error) {
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("oauth: wait for the redirect on %s: %w", r.uri, ctx.Err())
	case q := <-r.results:
		return codeFrom(q, state)
	}
}

// Close stops listening.
func (r *Receiver) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.srv.Shutdown(ctx)
}

// ParseRedirect reads the URL the browser was redirected to, pasted by the
// user of a headless machine (`syncd auth login --no-browser`), and returns
// its code, checked against state. A bare query string ("code=...&state=...")
// is accepted too.
func ParseRedirect(pasted, state string) (string, error) {
	pasted = strings.TrimSpace(pasted)
	if pasted == "" {
		return "", &AuthorizationError{Code: "no_code", Description: "nothing was pasted"}
	}
	raw := pasted
	if i := strings.IndexByte(pasted, '?'); i >= 0 {
		raw = pasted[i+1:]
	}
	if i := strings.IndexByte(raw, '#'); i >= 0 {
		raw = raw[:i]
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return "", &AuthorizationError{Code: "no_code", Description: "the pasted text is not a redirect URL"}
	}
	return codeFrom(q, state)
}

// codeFrom checks a redirect's query: error= first, then state, then code.
func codeFrom(q url.Values, state string) (string, error) {
	if e := q.Get("error"); e != "" {
		return "", &AuthorizationError{Code: e, Description: q.Get("error_description")}
	}
	if state == "" {
		return "", errors.New("oauth: no state to check the redirect against")
	}
	if q.Get("state") != state {
		return "", &AuthorizationError{Code: "state_mismatch", Description: "the redirect's state is not this login's"}
	}
	code := q.Get("code")
	if code == "" {
		return "", &AuthorizationError{Code: "no_code", Description: "the redirect has no code parameter"}
	}
	return code, nil
}
