package control

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/status"
)

// server serves the control endpoint of one `syncd run`.
type server struct {
	a        *app.App
	stopping <-chan struct{}
	log      *zap.Logger
}

// Start starts the control endpoint of the daemon that runs a, and writes
// the control file; stopping closes when a signal stops the daemon (a
// backfill it ends is interrupted, not failed). The returned stop waits
// (up to wait) for the requests in flight, closes the listener and removes
// the file. A control endpoint that cannot start is logged, and the daemon
// runs without one (the commands beside it then refuse, as before).
func Start(ctx context.Context, a *app.App, stopping <-chan struct{}, wait time.Duration) (stop func()) {
	log := a.Log.Named("control")
	path := Path(a.Cfg)
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
	c := &server{a: a, stopping: stopping, log: log}
	mux := http.NewServeMux()
	mux.Handle(pathPing, requireToken(token, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`+"\n")
	})))
	mux.Handle(pathBackfill, requireToken(token, http.HandlerFunc(c.backfill)))
	mux.Handle(pathSignIn, requireToken(token, http.HandlerFunc(c.signIn)))
	mux.Handle(pathSignedIn, requireToken(token, http.HandlerFunc(c.signedIn)))
	mux.Handle(pathSignOut, requireToken(token, http.HandlerFunc(c.signOut)))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	info, _ := json.Marshal(Info{Addr: ln.Addr().String(), Token: token, PID: os.Getpid()})
	if err := writePrivate(path, info); err != nil {
		ln.Close()
		log.Warn("no control endpoint: backfill and auth login beside this daemon will refuse", zap.Error(err))
		return func() {}
	}
	go func() { _ = srv.Serve(ln) }()
	log.Info("control endpoint for syncd backfill and auth login beside this daemon", zap.String(logkey.Addr, ln.Addr().String()), zap.String(logkey.ControlFile, path))
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

// eventWriter sends events, each flushed at once.
type eventWriter struct {
	mu  sync.Mutex
	w   http.ResponseWriter
	enc *json.Encoder
}

func (e *eventWriter) send(ev event) {
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
func (c *server) backfill(w http.ResponseWriter, r *http.Request) {
	var req BackfillRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("read the backfill request: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	ev := &eventWriter{w: w, enc: json.NewEncoder(w)}
	started := time.Now()
	results, code, err := c.runBackfill(r.Context(), req, ev)
	done := &Done{Code: code, Seconds: time.Since(started).Seconds()}
	if err != nil {
		done.Error = err.Error()
	}
	if results != nil {
		done.Results = status.Summarize(results, c.isStopping())
	}
	c.log.Info("backfill on request done", zap.String(logkey.Form, req.Form), zap.Int(logkey.ExitCode, code), zap.Int(logkey.Streams, len(results)))
	ev.send(event{Done: done})
}

func (c *server) isStopping() bool {
	select {
	case <-c.stopping:
		return true
	default:
		return false
	}
}

// runBackfill is the backfill and its exit code.
func (c *server) runBackfill(ctx context.Context, req BackfillRequest, ev *eventWriter) ([]poller.Result, int, error) {
	if !req.From.Before(req.To) {
		return nil, CodeUsage, fmt.Errorf("--from %s is not before --to %s", req.From.Format(time.RFC3339), req.To.Format(time.RFC3339))
	}
	accounts, err := c.accounts(req.Accounts, req.Form != "")
	if err != nil {
		return nil, CodeUsage, err
	}
	defer func() {
		for _, acct := range accounts {
			acct.Drop()
		}
	}()
	note := func(s string) { ev.send(event{Note: s}) }
	onBusy := func(stream string) {
		note(fmt.Sprintf("a scheduled pass of %s is running in the daemon: its backfill starts when that pass ends", stream))
	}
	end := req.To
	if horizon := accounts[0].Poller.Horizon(); end.After(horizon) {
		if !req.From.Before(horizon) {
			return nil, CodeUsage, fmt.Errorf("--from %s is not before now - sync.safety_lag (%s): there is nothing to backfill yet", req.From.Format(time.RFC3339), horizon.Format(time.RFC3339))
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
		if err := acct.Check(ctx, []string{req.Form}); err != nil {
			if app.IsBadID(err) {
				return nil, CodeUsage, err
			}
			return nil, CodeFailed, err
		}
		stream, err := acct.Stream(acct.Job(req.Form))
		if err != nil {
			return nil, CodeUsage, err
		}
		progress := func(p poller.Progress) { ev.send(event{Progress: &p}) }
		r := app.BackfillWaiting(ctx, acct.Poller, stream, req.From, end, concurrency, progress, onBusy)
		r.Account = acct.Name
		results := []poller.Result{r}
		return results, c.code(results), nil
	}
	results := app.ForEach(accounts, func(acct *app.Account) []poller.Result {
		return acct.Backfill(ctx, req.From, end, concurrency, onBusy)
	})
	return results, c.code(results), nil
}

// code is the exit code of results, as the command alone picks it.
func (c *server) code(results []poller.Result) int {
	signalled := c.isStopping()
	if status.Foreign(results) {
		return CodeUsage // the operator's to settle (state adopt), as finishPass says
	}
	if status.Failed(results, signalled) > 0 {
		return CodeFailed
	}
	for _, r := range results {
		if status.Outcome(r, signalled) == "interrupted" {
			return CodeFailed // the daemon stopped: the command was not done
		}
	}
	return CodeOK
}

// accounts are the open accounts names selects (all when empty); one for
// a command on one form. Each is held (the caller drops it), so that a
// reload closes none of them under the command.
func (c *server) accounts(names []string, one bool) (list []*app.Account, err error) {
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

// signIn stores the tokens of a sign-in through the daemon's open store.
func (c *server) signIn(w http.ResponseWriter, r *http.Request) {
	var req signInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, errors.New("read the sign-in request: not JSON"))
		return
	}
	if err := c.a.StoreSignIn(r.Context(), req.Account, req.Source, req.Token); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	c.log.Info("sign-in stored on request of syncd auth login", zap.String(logkey.Account, req.Account), zap.String(logkey.Source, req.Source))
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`+"\n")
}

// signedIn answers `syncd auth status` beside the daemon from its state.
func (c *server) signedIn(w http.ResponseWriter, r *http.Request) {
	var req signedInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, errors.New("read the sign-in status request: not JSON"))
		return
	}
	if req.Source == sourceForms {
		c.formsSignedIn(w, r, req)
		return
	}
	acct := config.Account{Name: req.Namespace}
	if req.Namespace == "" {
		acct.Name = config.DefaultAccount
	}
	stored, err := c.a.StoredSignIn(r.Context(), acct, sourceScheduling, false)
	var ans signedInAnswer
	tok, isOAuth := stored.(oauth.Token)
	switch {
	case errors.Is(err, oauth.ErrNoToken):
		ans.NoToken = true
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	case !isOAuth:
		writeError(w, http.StatusInternalServerError, fmt.Errorf("the %s source's sign-in is not an OAuth token pair", sourceScheduling))
		return
	default:
		ans.Summary = tok.Summary()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// formsSignedIn reads and checks the Forms API sign-in of req.Account.
func (c *server) formsSignedIn(w http.ResponseWriter, r *http.Request, req signedInRequest) {
	acct := c.a.Account(req.Account)
	if acct == nil {
		writeError(w, http.StatusConflict, &app.NotOpenError{Account: req.Account, Shared: c.a.Cfg.State.Shared})
		return
	}
	var ans signedInAnswer
	stored, err := c.a.StoredSignIn(r.Context(), acct.Cfg, sourceForms, true)
	if tok, ok := stored.(formsauth.Token); ok {
		ans.BaseURL, ans.ObtainedAt = tok.BaseURL, tok.ObtainedAt
	}
	ae := app.AsSourceError(err)
	switch {
	case errors.Is(err, app.ErrNoSignIn):
		ans.NoToken = true
	case ae != nil && ae.Kind == app.SourceAuth:
		ans.AuthStatus = ae.Status
	case err != nil:
		ans.Error = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// signOut forgets a sign-in through the daemon's open store.
func (c *server) signOut(w http.ResponseWriter, r *http.Request) {
	var req signInRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, errors.New("read the sign-out request: not JSON"))
		return
	}
	if err := c.a.ForgetSignIn(r.Context(), req.Account, req.Source); err != nil {
		writeError(w, http.StatusConflict, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`+"\n")
}
