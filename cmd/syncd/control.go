package main

// The control endpoint of `syncd run`: how `syncd backfill` and `syncd auth
// login` get their work done by a daemon that holds the state, instead of
// refusing (exit 3) or waiting for a state that a daemon never gives back.
//
// It is a listener on loopback (127.0.0.1, a port the kernel picks), apart
// from server.addr, which other pods may reach; every request must carry
// the token of the control file, which the daemon writes with mode 0600
// beside the state file (<state.path>.control), or, for a state in a bucket,
// in the temporary directory. Only the daemon's user on the same host (or a
// `kubectl exec` into its pod, as that user) can read it. A unix socket
// would need no token, but its path is limited to 107 bytes and some
// volumes cannot hold one; the token file works wherever the state does.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	forms "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
)

// Control endpoint paths.
const (
	controlBackfill = "/v1/backfill"
	controlSignIn   = "/v1/signin"
	controlPing     = "/v1/ping"
	controlSignedIn = "/v1/signin/status"
	controlSignOut  = "/v1/signout"
)

// controlInfo is the content of the control file.
type controlInfo struct {
	Addr  string `json:"addr"`  // host:port on loopback
	Token string `json:"token"` // the bearer token every request carries
	PID   int    `json:"pid"`
}

// controlPath is where the daemon of cfg's state writes its control file.
func controlPath(cfg *config.Config) string {
	if cfg.State.URL == "" {
		return cfg.State.Path + ".control"
	}
	sum := sha256.Sum256([]byte(cfg.State.URL))
	return filepath.Join(os.TempDir(), "syncd-"+hex.EncodeToString(sum[:8])+".control")
}

// readControl reads the control file of cfg's state. A file that another
// user owns, or that others may read, is refused: in a shared temporary
// directory it could be planted to have the tokens of a sign-in sent
// elsewhere.
func readControl(cfg *config.Config) (controlInfo, error) {
	p := controlPath(cfg)
	f, err := os.Open(p)
	if err != nil {
		return controlInfo{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return controlInfo{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	if err := privateFile(fi); err != nil {
		return controlInfo{}, fmt.Errorf("the daemon's control file %s is not to be trusted (%w): remove it and restart the daemon", p, err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return controlInfo{}, fmt.Errorf("read the daemon's control file %s: %w", p, err)
	}
	var ci controlInfo
	if err := json.Unmarshal(raw, &ci); err != nil || ci.Addr == "" || ci.Token == "" {
		return controlInfo{}, fmt.Errorf("the daemon's control file %s cannot be read: restart the daemon", p)
	}
	return ci, nil
}

// privateFile checks that fi is a regular file of this process's user that
// no one else may read or write.
func privateFile(fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	uid, ok := fileOwner(fi)
	if !ok {
		return nil // no owner nor unix mode to check (Windows: the folder's ACL guards it)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("mode %v: others may read it", perm)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("owned by uid %d, not by this user (uid %d)", uid, os.Getuid())
	}
	return nil
}

// authorized reports whether r carries token (compared in constant time).
func authorized(r *http.Request, token string) bool {
	const prefix = "Bearer "
	h := r.Header.Get("Authorization")
	if len(h) <= len(prefix) || h[:len(prefix)] != prefix {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(token)) == 1
}

// requireToken refuses, before anything is read or done, a request without
// the control token, and anything but POST.
func requireToken(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, token) {
			writeControlError(w, http.StatusUnauthorized, errors.New("this control endpoint needs the token of the daemon's control file (readable by its user only): nothing was done"))
			return
		}
		if r.Method != http.MethodPost {
			writeControlError(w, http.StatusMethodNotAllowed, errors.New("use POST"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeControlError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// controlServer serves the control endpoint of one `syncd run`.
type controlServer struct {
	a        *app.App
	stopping <-chan struct{}
	log      *zap.Logger
}

// startControl starts the control endpoint and writes the control file; the
// returned stop waits (up to wait) for the requests in flight, closes the
// listener and removes the file. A control endpoint that cannot start is
// logged, and the daemon runs without one (the commands beside it then
// refuse, as before).
func startControl(ctx context.Context, a *app.App, g *globals, wait time.Duration) (stop func()) {
	log := a.Log.Named("control")
	path := controlPath(a.Cfg)
	tokenBytes := make([]byte, 32)
	if _, err := rand.Read(tokenBytes); err != nil {
		log.Warn("no control endpoint: backfill and auth login beside this daemon will refuse", zap.Error(err))
		return func() {}
	}
	token := hex.EncodeToString(tokenBytes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Warn("no control endpoint: backfill and auth login beside this daemon will refuse", zap.Error(err))
		return func() {}
	}
	c := &controlServer{a: a, stopping: g.stopping, log: log}
	mux := http.NewServeMux()
	mux.Handle(controlPing, requireToken(token, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`+"\n")
	})))
	mux.Handle(controlBackfill, requireToken(token, http.HandlerFunc(c.backfill)))
	mux.Handle(controlSignIn, requireToken(token, http.HandlerFunc(c.signIn)))
	mux.Handle(controlSignedIn, requireToken(token, http.HandlerFunc(c.signedIn)))
	mux.Handle(controlSignOut, requireToken(token, http.HandlerFunc(c.signOut)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	info, _ := json.Marshal(controlInfo{Addr: ln.Addr().String(), Token: token, PID: os.Getpid()})
	if err := writePrivate(path, info); err != nil {
		ln.Close()
		log.Warn("no control endpoint: backfill and auth login beside this daemon will refuse", zap.Error(err))
		return func() {}
	}
	go func() { _ = srv.Serve(ln) }()
	log.Info("control endpoint for syncd backfill and auth login beside this daemon", zap.String("addr", ln.Addr().String()), zap.String("control_file", path))
	return func() {
		// Only this daemon's file goes: a newer daemon may have written its own.
		if raw, err := os.ReadFile(path); err == nil && bytes.Equal(raw, info) {
			_ = os.Remove(path)
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
	}
}

// writePrivate writes b to path, readable by its owner only, replacing it
// whole (a reader never sees half a file).
func writePrivate(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write the control file %s: %w", path, err)
	}
	return nil
}

// backfillRequest is what `syncd backfill` asks of the daemon.
type backfillRequest struct {
	Accounts    []string  `json:"accounts,omitempty"` // --account
	Form        string    `json:"form,omitempty"`     // empty: every form of the accounts
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	ToAsked     bool      `json:"to_asked"` // --to given: a cut at now - safety_lag is said
	Concurrency int       `json:"concurrency,omitempty"`
}

// controlEvent is one line of the daemon's answer (JSON lines): a note for
// the command's stderr, a backfill's progress, or, last, the outcome.
type controlEvent struct {
	Note     string           `json:"note,omitempty"`
	Progress *poller.Progress `json:"progress,omitempty"`
	Done     *controlDone     `json:"done,omitempty"`
}

// controlDone is the outcome: the exit code the command alone would have
// had, and its summary (or the error that stopped it before any stream ran).
type controlDone struct {
	Code    int            `json:"code"`
	Error   string         `json:"error,omitempty"`
	Results []summaryEntry `json:"results,omitempty"`
	Seconds float64        `json:"seconds"`
}

// eventWriter sends controlEvents, each flushed at once.
type eventWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	enc *json.Encoder
}

func (e *eventWriter) send(ev controlEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_ = e.enc.Encode(ev)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// backfill runs a backfill in the daemon, as `syncd backfill` alone would:
// the same clamp at now - safety_lag, the same engine (intents, exactly
// once), and, per stream, the lock the scheduled passes take, waited for.
// The request's end (the command interrupted, its connection closed)
// cancels it: what it committed stays committed.
func (c *controlServer) backfill(w http.ResponseWriter, r *http.Request) {
	var req backfillRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeControlError(w, http.StatusBadRequest, fmt.Errorf("read the backfill request: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	ev := &eventWriter{w: w, enc: json.NewEncoder(w)}
	started := time.Now()
	results, code, err := c.runBackfill(r.Context(), req, ev)
	done := &controlDone{Code: code, Seconds: time.Since(started).Seconds()}
	if err != nil {
		done.Error = err.Error()
	}
	if results != nil {
		done.Results = summaryEntries(results, c.isStopping())
	}
	c.log.Info("backfill on request done", zap.String("form", req.Form), zap.Int("exit_code", code), zap.Int("streams", len(results)))
	ev.send(controlEvent{Done: done})
}

func (c *controlServer) isStopping() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}

// runBackfill is the backfill and its exit code.
func (c *controlServer) runBackfill(ctx context.Context, req backfillRequest, ev *eventWriter) ([]poller.Result, int, error) {
	if !req.From.Before(req.To) {
		return nil, exitUsage, fmt.Errorf("--from %s is not before --to %s", req.From.Format(time.RFC3339), req.To.Format(time.RFC3339))
	}
	accounts, err := c.accounts(req.Accounts, req.Form != "")
	if err != nil {
		return nil, exitUsage, err
	}
	defer func() {
		for _, acct := range accounts {
			acct.Drop()
		}
	}()
	note := func(s string) { ev.send(controlEvent{Note: s}) }
	onBusy := func(stream string) {
		note(fmt.Sprintf("a scheduled pass of %s is running in the daemon: its backfill starts when that pass ends", stream))
	}
	end := req.To
	if horizon := accounts[0].Poller.Horizon(); end.After(horizon) {
		if !req.From.Before(horizon) {
			return nil, exitUsage, fmt.Errorf("--from %s is not before now - sync.safety_lag (%s): there is nothing to backfill yet", req.From.Format(time.RFC3339), horizon.Format(time.RFC3339))
		}
		if req.ToAsked {
			note(fmt.Sprintf("--to %s is past now - sync.safety_lag; backfilling up to %s instead (later submissions come with the live sync)", end.Format(time.RFC3339), horizon.Format(time.RFC3339Nano)))
		}
		end = horizon
	}
	concurrency := req.Concurrency
	if concurrency < 1 {
		concurrency = c.a.Cfg.Sync.Concurrency
	}
	if req.Form != "" {
		acct := accounts[0]
		if acct.Client != nil {
			if err := app.CheckForms(ctx, acct.Client, []string{req.Form}); err != nil {
				var unknown *app.UnknownFormError
				if errors.As(err, &unknown) {
					return nil, exitUsage, err
				}
				return nil, exitFailed, err
			}
		}
		progress := func(p poller.Progress) { ev.send(controlEvent{Progress: &p}) }
		r := app.BackfillWaiting(ctx, acct.Poller, acct.FormStream(acct.Job(req.Form)), req.From, end, concurrency, progress, onBusy)
		r.Account = acct.Name
		results := []poller.Result{r}
		return results, c.code(results), nil
	}
	results := app.ForEach(accounts, func(acct *app.Account) []poller.Result {
		return acct.Backfill(ctx, req.From, end, concurrency, onBusy)
	})
	return results, c.code(results), nil
}

// code is the exit code of results, as finishPass picks it.
func (c *controlServer) code(results []poller.Result) int {
	signalled := c.isStopping()
	for _, r := range results {
		var foreign *poller.ForeignOutputError
		if errors.As(r.Err, &foreign) {
			return exitUsage
		}
	}
	if failed(results, signalled) > 0 {
		return exitFailed
	}
	for _, r := range results {
		if outcome(r, signalled) == "interrupted" {
			return exitFailed // the daemon stopped: the command was not done
		}
	}
	return exitOK
}

// accounts are the open accounts names selects (all when empty); one for
// a command on one form. Each is held (the caller drops it), so that a
// reload closes none of them under the command.
func (c *controlServer) accounts(names []string, one bool) (list []*app.Account, err error) {
	defer func() {
		if err != nil {
			for _, acct := range list {
				acct.Drop()
			}
			list = nil
		}
	}()
	if len(names) == 0 {
		for _, acct := range c.a.OpenAccounts() {
			if acct.Hold() {
				list = append(list, acct)
			}
		}
	}
	for _, n := range names {
		acct := c.a.HoldAccount(n)
		if acct == nil {
			return list, &app.NotOpenError{Account: n, Shared: c.a.Cfg.State.Shared}
		}
		list = append(list, acct)
	}
	if len(list) == 0 {
		return nil, errors.New("this daemon has no account open now: nothing to backfill")
	}
	if one && len(list) > 1 {
		all := make([]string, 0, len(list))
		for _, a := range list {
			all = append(all, a.Name)
		}
		return list, &app.AccountNeededError{Names: all}
	}
	return list, nil
}

// signInRequest hands the daemon the tokens `syncd auth login` obtained.
type signInRequest struct {
	Account string          `json:"account"`
	Source  string          `json:"source"` // scheduling or forms
	Token   json.RawMessage `json:"token"`
}

// signIn stores the tokens of a sign-in through the daemon's open store.
func (c *controlServer) signIn(w http.ResponseWriter, r *http.Request) {
	var req signInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeControlError(w, http.StatusBadRequest, errors.New("read the sign-in request: not JSON"))
		return
	}
	var err error
	switch req.Source {
	case sourceScheduling:
		var tok oauth.Token
		if err = json.Unmarshal(req.Token, &tok); err == nil {
			err = c.a.StoreSchedulingSignIn(r.Context(), req.Account, tok)
		}
	case sourceForms:
		var tok formsauth.Token
		if err = json.Unmarshal(req.Token, &tok); err == nil {
			err = c.a.StoreFormsSignIn(r.Context(), req.Account, tok)
		}
	default:
		writeControlError(w, http.StatusBadRequest, fmt.Errorf("source %q: use scheduling or forms", req.Source))
		return
	}
	if err != nil {
		writeControlError(w, http.StatusConflict, err)
		return
	}
	c.log.Info("sign-in stored on request of syncd auth login", zap.String("account", req.Account), zap.String("source", req.Source))
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`+"\n")
}

// signedInRequest asks for the stored sign-in of an account: the
// scheduling API's (by namespace), or, with Source forms, the Forms API's of
// the account named Account, which the daemon checks with GET /forms.
type signedInRequest struct {
	Namespace string `json:"namespace"`
	Source    string `json:"source,omitempty"`
	Account   string `json:"account,omitempty"`
}

// signedInAnswer is the stored sign-in's facts, never a token: the
// scheduling API's summary, or the Forms API's base URL, when it was
// obtained and how its check went.
type signedInAnswer struct {
	NoToken    bool          `json:"no_token,omitempty"`
	Summary    oauth.Summary `json:"summary"`
	BaseURL    string        `json:"base_url,omitempty"`
	ObtainedAt time.Time     `json:"obtained_at,omitzero"`
	AuthStatus int           `json:"auth_status,omitempty"` // the Forms API refused the token with this status
	Error      string        `json:"error,omitempty"`       // the check failed otherwise
}

// signedIn answers `syncd auth status` beside the daemon from its state.
func (c *controlServer) signedIn(w http.ResponseWriter, r *http.Request) {
	var req signedInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeControlError(w, http.StatusBadRequest, errors.New("read the sign-in status request: not JSON"))
		return
	}
	if req.Source == sourceForms {
		c.formsSignedIn(w, r, req)
		return
	}
	tok, err := (app.StateTokens{Store: c.a.Store, Namespace: req.Namespace}).Load(r.Context())
	var ans signedInAnswer
	switch {
	case errors.Is(err, oauth.ErrNoToken):
		ans.NoToken = true
	case err != nil:
		writeControlError(w, http.StatusInternalServerError, err)
		return
	default:
		ans.Summary = tok.Summary()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// formsSignedIn reads and checks the Forms API sign-in of req.Account.
func (c *controlServer) formsSignedIn(w http.ResponseWriter, r *http.Request, req signedInRequest) {
	acct := c.a.Account(req.Account)
	if acct == nil {
		writeControlError(w, http.StatusConflict, &app.NotOpenError{Account: req.Account, Shared: c.a.Cfg.State.Shared})
		return
	}
	var ans signedInAnswer
	tok, err := app.FormsTokens{Store: c.a.Store, Namespace: acct.Cfg.Namespace()}.Load(r.Context())
	if err == nil {
		ans.BaseURL, ans.ObtainedAt = tok.BaseURL, tok.ObtainedAt
		err = app.CheckFormsToken(r.Context(), c.a.Current(), acct.Cfg, tok, c.log)
	}
	var ae *forms.AuthError
	switch {
	case errors.Is(err, app.ErrNoFormsToken):
		ans.NoToken = true
	case errors.As(err, &ae):
		ans.AuthStatus = ae.Status
	case err != nil:
		ans.Error = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// formsSignInStatus is the Forms API sign-in of account as the daemon
// reads and checks it: what FormsTokens.Load and CheckFormsToken return.
func (c *controlClient) formsSignInStatus(ctx context.Context, account string) (formsauth.Token, error) {
	ans, err := c.askSignedIn(ctx, signedInRequest{Source: sourceForms, Account: account})
	if err != nil {
		return formsauth.Token{}, err
	}
	tok := formsauth.Token{BaseURL: ans.BaseURL, ObtainedAt: ans.ObtainedAt}
	switch {
	case ans.NoToken:
		return tok, app.ErrNoFormsToken
	case ans.AuthStatus != 0:
		return tok, &forms.AuthError{BaseURL: ans.BaseURL, Status: ans.AuthStatus}
	case ans.Error != "":
		return tok, errors.New(ans.Error)
	}
	return tok, nil
}

// signInStatus is the stored sign-in of namespace as the daemon reads it:
// its facts only (the token's secrets stay in the daemon).
func (c *controlClient) signInStatus(ctx context.Context, namespace string) (oauth.Token, error) {
	ans, err := c.askSignedIn(ctx, signedInRequest{Namespace: namespace})
	if err != nil {
		return oauth.Token{}, err
	}
	if ans.NoToken {
		return oauth.Token{}, oauth.ErrNoToken
	}
	s := ans.Summary
	return oauth.Token{ClientID: s.ClientID, User: s.User, UserID: s.UserID, Scopes: s.Scopes, Legacy: s.Legacy, Expiry: s.Expiry, IssuedAt: s.IssuedAt}, nil
}

// askSignedIn asks the daemon for a stored sign-in's facts.
func (c *controlClient) askSignedIn(ctx context.Context, req signedInRequest) (signedInAnswer, error) {
	var ans signedInAnswer
	resp, err := c.post(ctx, controlSignedIn, req)
	if err != nil {
		return ans, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return ans, fmt.Errorf("read the daemon's answer: %w", err)
	}
	return ans, nil
}

// signOut forgets a sign-in through the daemon's open store.
func (c *controlServer) signOut(w http.ResponseWriter, r *http.Request) {
	var req signInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeControlError(w, http.StatusBadRequest, errors.New("read the sign-out request: not JSON"))
		return
	}
	if err := c.a.ForgetSignIn(r.Context(), req.Account, req.Source); err != nil {
		writeControlError(w, http.StatusConflict, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`+"\n")
}

// controlClient is a command's side of the control endpoint.
type controlClient struct {
	info controlInfo
	path string
}

// daemonControl is the control endpoint of the daemon that holds cfg's
// state (held is the error that says so), checked with a ping; the error
// says what to do when there is none.
func daemonControl(ctx context.Context, cfg *config.Config, held *state.LockedError) (*controlClient, error) {
	ci, err := readControl(cfg)
	// A control file of another process than the holder is a stale one (a
	// daemon killed with SIGKILL), beside a `syncd once`, say.
	if errors.Is(err, os.ErrNotExist) || err == nil && held.Holder != nil && held.Holder.PID != 0 && held.Holder.PID != ci.PID {
		msg := fmt.Sprintf("%v (and it has no control endpoint, %s: a `syncd once`, or a syncd on another host, holds it; let it finish, or run this command where it runs)", held, controlPath(cfg))
		if cfg.State.Shared {
			msg += "; with state.shared, in the pod of the replica whose /readyz lists the account"
		}
		return nil, errors.New(msg)
	}
	if err != nil {
		return nil, heldHint(cfg, held, err)
	}
	c := &controlClient{info: ci, path: controlPath(cfg)}
	pctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	resp, err := c.post(pctx, controlPing, struct{}{})
	if err != nil {
		return nil, heldHint(cfg, held, err)
	}
	resp.Body.Close()
	return c, nil
}

// heldHint is the refusal of a command that needs the state a syncd holds
// and could not reach that syncd's control endpoint (why).
func heldHint(cfg *config.Config, held, why error) error {
	msg := fmt.Sprintf("%v; and the running syncd could not do it either (%v): run this command on the host (or in the pod: kubectl exec) of the running syncd, as its user, or stop it", held, why)
	if cfg.State.Shared {
		msg += " (with state.shared, in the pod of the replica whose /readyz lists the account)"
	}
	return errors.New(msg)
}

func (c *controlClient) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.info.Addr+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.info.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach the daemon's control endpoint %s (control file %s): %w", c.info.Addr, c.path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if json.Unmarshal(raw, &e) != nil || e.Error == "" {
			e.Error = resp.Status
		}
		return nil, &controlRefusal{status: resp.StatusCode, msg: e.Error}
	}
	return resp, nil
}

// controlRefusal is the daemon's refusal of a request.
type controlRefusal struct {
	status int
	msg    string
}

func (e *controlRefusal) Error() string { return "the running syncd refused: " + e.msg }

// signIn hands the daemon the sign-in of account (source: scheduling or
// forms).
func (c *controlClient) signIn(ctx context.Context, account, source string, tok any) error {
	raw, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, controlSignIn, signInRequest{Account: account, Source: source, Token: raw})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// signOut has the daemon forget the sign-in of account (source:
// scheduling or forms).
func (c *controlClient) signOut(ctx context.Context, account, source string) error {
	resp, err := c.post(ctx, controlSignOut, signInRequest{Account: account, Source: source})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// forgetSignIn deletes the sign-in of acct (source: scheduling or forms)
// with del when the state opens for writing, or through the running syncd
// that holds it. how is "" or says the daemon did it.
func forgetSignIn(ctx context.Context, cfg *config.Config, acct config.Account, source string, del func(state.Store) error) (how string, err error) {
	store, err := app.OpenStoreOf(ctx, cfg, acct.Namespace())
	if held, ok := heldByDaemon(err); ok {
		c, cerr := daemonControl(ctx, cfg, held)
		if cerr != nil {
			return "", withCode(exitState, cerr)
		}
		if err := c.signOut(ctx, acct.Name, source); err != nil {
			return "", withCode(exitFailed, err)
		}
		return fmt.Sprintf(" (by the running syncd, pid %d)", c.info.PID), nil
	}
	if err != nil {
		return "", withCode(exitState, err)
	}
	defer store.Close()
	if err := del(store); err != nil {
		return "", withCode(exitFailed, err)
	}
	return "", nil
}

// backfill runs req in the daemon: notes and progress as they come, then
// the outcome. A read that ends before the outcome (the daemon stopped, or
// ctx ended) is an error.
func (c *controlClient) backfill(ctx context.Context, req backfillRequest, note func(string), progress func(poller.Progress)) (*controlDone, error) {
	resp, err := c.post(ctx, controlBackfill, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev controlEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("read the daemon's answer: %w", err)
		}
		switch {
		case ev.Done != nil:
			return ev.Done, nil
		case ev.Progress != nil:
			progress(*ev.Progress)
		case ev.Note != "":
			note(ev.Note)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the daemon's answer: %w", err)
	}
	return nil, errors.New("the daemon's answer ended before the backfill did (the daemon stopped?): what it committed stays committed; run the backfill again")
}

// resultsOf are the results a daemon's summary describes, for printing as
// the command alone prints them.
func resultsOf(entries []summaryEntry) []poller.Result {
	out := make([]poller.Result, 0, len(entries))
	for _, e := range entries {
		r := poller.Result{Account: e.Account, Source: e.Source, FormID: e.FormID, Table: e.Table, Rows: e.Rows, Batches: e.Batches,
			Requests: e.Requests, Misfits: e.Misfits, Discarded: e.Discarded, Duration: time.Duration(e.Seconds * float64(time.Second)),
			Interrupted: e.Status == "interrupted", Reconciled: e.Reconciled, ReconciledWindows: e.ReconciledWindows, Versions: e.Versions, Tombstones: e.Tombstones}
		if e.CoveredStart != nil {
			r.CoveredStart = *e.CoveredStart
		}
		if e.CoveredEnd != nil {
			r.CoveredEnd = *e.CoveredEnd
		}
		if e.ClampedTo != nil {
			r.ClampedTo = *e.ClampedTo
		}
		if e.Error != "" {
			r.Err = errors.New(e.Error)
		}
		out = append(out, r)
	}
	return out
}

// heldByDaemon is the *state.LockedError of err when a syncd holds the
// state (not a read-only reader, which holds it briefly).
func heldByDaemon(err error) (*state.LockedError, bool) {
	var le *state.LockedError
	if errors.As(err, &le) && !le.Foreign {
		return le, true
	}
	return nil, false
}
