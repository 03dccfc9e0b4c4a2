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
	"sync"
	"time"
)

// Receiver waits on the loopback address of the redirect URI for the
// browser to come back from the authorization page.
//
// The browser's request is held open until the sign-in's outcome is known
// (Finish): the page it gets says "signed in" only once the code was
// exchanged and the tokens saved, never merely because a redirect came.
type Receiver struct {
	ln      net.Listener
	srv     *http.Server
	path    string
	uri     string
	results chan *redirect
	// answerWait bounds how long the browser waits for the outcome; past
	// it, the page says the sign-in is still being finished.
	answerWait time.Duration
	stop       chan struct{} // closed by Close
	stopOnce   sync.Once

	mu      sync.Mutex
	taken   bool      // the single redirect is in (later ones are not used)
	current *redirect // taken by Wait, its outcome not yet given
	outcome *page     // the page the redirect got, for a reload
}

// redirect is the one request whose query signs in, with the channel its
// handler waits on for the page to answer.
type redirect struct {
	query url.Values
	done  chan page // buffered: Finish never blocks
}

// page is an answer to the browser: a status and one sentence of plain
// text, escaped when written.
type page struct {
	status int
	text   string
}

// answerWait is the default of Receiver.answerWait: the exchange, the check
// of the token and a save that waits for a busy state (2 minutes).
const answerWait = 3 * time.Minute

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
	r := &Receiver{ln: ln, path: u.EscapedPath(), results: make(chan *redirect, 1), answerWait: answerWait, stop: make(chan struct{})}
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

// ServeHTTP takes the first redirect and answers it with the outcome of the
// sign-in once Finish gives it (or after answerWait, with a page saying it
// is still being finished). Later requests (a reload, a stray request) are
// not used: they get the outcome when it is known.
func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.EscapedPath() != r.path {
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	if r.taken {
		out := r.outcome
		r.mu.Unlock()
		if out == nil {
			out = &page{http.StatusConflict, "syncd is already finishing a sign-in from an earlier visit of this address: the terminal says how it ends."}
		}
		writePage(w, *out)
		return
	}
	r.taken = true
	r.mu.Unlock()
	rd := &redirect{query: req.URL.Query(), done: make(chan page, 1)}
	r.results <- rd // the first and only send: the buffer holds it
	timer := time.NewTimer(r.answerWait)
	defer timer.Stop()
	select {
	case p := <-rd.done:
		writePage(w, p)
	case <-r.stop:
		// An outcome given just before Close wins over "stopped".
		select {
		case p := <-rd.done:
			writePage(w, p)
		default:
			writePage(w, pageFor(errStopped))
		}
	case <-timer.C:
		writePage(w, page{http.StatusAccepted, "syncd is still finishing the sign-in (exchanging the code, saving the tokens): the terminal says when it is done. Nothing is confirmed yet."})
	case <-req.Context().Done():
	}
}

// writePage answers with a short HTML page whose text is escaped: it may
// hold an error code the redirect carried.
func writePage(w http.ResponseWriter, p page) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// The redirect's URL carries the code: keep it out of referrers.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(p.status)
	fmt.Fprintf(w, "<!doctype html><title>syncd</title><p>%s</p>\n", html.EscapeString(p.text))
}

// Wait returns the code of the first redirect, checked against state. A
// redirect that fails the check is answered at once with a page saying why;
// otherwise the browser waits until Finish gives the outcome of the sign-in.
func (r *Receiver) Wait(ctx context.Context, state string) (string, error) {
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("oauth: wait for the redirect on %s: %w", r.uri, ctx.Err())
	case rd := <-r.results:
		r.mu.Lock()
		r.current = rd
		r.mu.Unlock()
		code, err := codeFrom(rd.query, state)
		if err != nil {
			r.Finish(err)
		}
		return code, err
	}
}

// Finish answers the browser that brought the code with the outcome of the
// sign-in: err nil once the tokens are saved (the page says signed in), or
// what failed, preferably a *StepError naming the step. Later calls do
// nothing.
func (r *Receiver) Finish(err error) {
	p := pageFor(err)
	r.mu.Lock()
	rd := r.current
	r.current = nil
	if rd != nil {
		r.outcome = &p
	}
	r.mu.Unlock()
	if rd != nil {
		rd.done <- p
	}
}

// Close stops listening. A browser still waiting is told that syncd
// stopped before the sign-in was finished, never that it worked.
func (r *Receiver) Close() error {
	r.Finish(errStopped)
	r.stopOnce.Do(func() { close(r.stop) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return r.srv.Shutdown(ctx)
}

// errStopped is the outcome of a redirect syncd did not finish.
var errStopped = errors.New("oauth: syncd stopped before the sign-in was finished")

// Step is a step of a sign-in after the redirect, named on the browser's
// page when it fails.
type Step int

// The steps after the redirect.
const (
	StepExchange Step = iota + 1 // the code for tokens
	StepCheck                    // the new token at the API
	StepSave                     // the tokens into the state
)

func (s Step) String() string {
	switch s {
	case StepExchange:
		return "exchange the authorization code for tokens"
	case StepCheck:
		return "check the new token at the API"
	case StepSave:
		return "save the sign-in in its state"
	default:
		return "finish the sign-in"
	}
}

// StepError marks err as the failure of step, for the browser's page
// (Receiver.Finish). It reads as err alone: the terminal's message does not
// change.
type StepError struct {
	Step Step
	Err  error
}

func (e *StepError) Error() string { return e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// StepFailed is err marked as the failure of step; nil when err is nil.
func StepFailed(step Step, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: step, Err: err}
}

// pageFor is the browser's page of an outcome. Its text is built from
// constants and an error code of RFC 6749's shape only: never an error's
// message, which may hold a path or a description from the query.
func pageFor(err error) page {
	if err == nil {
		return page{http.StatusOK, "syncd is signed in. You can close this tab."}
	}
	const back = " Go back to the terminal: it says what to do."
	var ae *AuthorizationError
	if errors.As(err, &ae) {
		switch ae.Code {
		case "access_denied":
			return page{http.StatusBadRequest, "syncd is not signed in: the request was not approved on the authorization page (access_denied)." + back}
		case "state_mismatch":
			return page{http.StatusBadRequest, "syncd is not signed in: this redirect does not belong to the sign-in syncd is waiting for (an old tab, or a link from someone else), so its code was not used." + back}
		case "no_code":
			return page{http.StatusBadRequest, "syncd is not signed in: the redirect carries no authorization code." + back}
		default:
			return page{http.StatusBadRequest, "syncd is not signed in: the authorization page answered " + shownCode(ae.Code) + "." + back}
		}
	}
	if errors.Is(err, errStopped) {
		return page{http.StatusServiceUnavailable, "syncd is not signed in: it stopped before the sign-in was finished." + back}
	}
	var se *StepError
	if !errors.As(err, &se) {
		return page{http.StatusInternalServerError, "syncd is not signed in: the sign-in could not be finished." + back}
	}
	text := "syncd is not signed in: it could not " + se.Step.String()
	var te *TokenEndpointError
	if errors.As(err, &te) {
		text += " (the token endpoint answered " + shownCode(te.Code) + ")"
		switch te.Code {
		case "invalid_client":
			text += ": the client id or secret in syncd's settings is not the OAuth client's"
		case "invalid_grant":
			text += ": the code expired or was already used"
		}
	}
	status := http.StatusBadGateway // a refusal or failure of the API
	if se.Step == StepSave {
		status = http.StatusInternalServerError
	}
	return page{status, text + "." + back}
}

// shownCode is an error code as a page shows it: RFC 6749's characters
// only (it comes from the query or an answer, which anyone can write).
func shownCode(code string) string {
	if code == "" || !errorCode.MatchString(code) {
		return "an unknown error"
	}
	return code
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
