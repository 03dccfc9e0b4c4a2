package control

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
)

// pingTimeout bounds the wait for the daemon's answer to Connect's ping.
const pingTimeout = 5 * time.Second

// Client is a command's side of the control endpoint.
type Client struct {
	info Info
	path string
}

// PID is the process id of the daemon the client talks to.
func (c *Client) PID() int { return c.info.PID }

// HeldByDaemon is the *state.LockedError of err when a syncd holds the
// state (not a read-only reader, which holds it briefly): the state a
// command may reach through Connect.
func HeldByDaemon(err error) (*state.LockedError, bool) {
	var le *state.LockedError
	if errors.As(err, &le) && !le.Foreign {
		return le, true
	}
	return nil, false
}

// Connect is the control endpoint of the daemon that holds cfg's state
// (held is the error that says so), checked with a ping; the error says
// what to do when there is none.
func Connect(ctx context.Context, cfg *config.Config, held *state.LockedError) (*Client, error) {
	ci, err := Read(cfg)
	// A control file of another process than the holder is a stale one (a
	// daemon killed with SIGKILL), beside a `syncd once`, say.
	if errors.Is(err, os.ErrNotExist) || err == nil && held.Holder != nil && held.Holder.PID != 0 && held.Holder.PID != ci.PID {
		msg := fmt.Sprintf("%v (and it has no control endpoint, %s: a `syncd once`, or a syncd on another host, holds it; let it finish, or run this command where it runs)", held, Path(cfg))
		if cfg.State.Shared {
			msg += "; with state.shared, in the pod of the replica whose /readyz lists the account"
		}
		return nil, errors.New(msg)
	}
	if err != nil {
		return nil, heldHint(cfg, held, err)
	}
	c := &Client{info: ci, path: Path(cfg)}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	resp, err := c.post(pctx, pathPing, struct{}{})
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

func (c *Client) post(ctx context.Context, path string, body any) (*http.Response, error) {
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
		return nil, &Refusal{Status: resp.StatusCode, msg: e.Error}
	}
	return resp, nil
}

// Refusal is the daemon's refusal of a request, with the HTTP status it
// answered.
type Refusal struct {
	Status int
	msg    string
}

func (e *Refusal) Error() string { return "the running syncd refused: " + e.msg }

// SignIn hands the daemon the sign-in of account (source: scheduling or
// forms).
func (c *Client) SignIn(ctx context.Context, account, source string, tok any) error {
	raw, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, pathSignIn, signInRequest{Account: account, Source: source, Token: raw})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// SignOut has the daemon forget the sign-in of account (source:
// scheduling or forms).
func (c *Client) SignOut(ctx context.Context, account, source string) error {
	resp, err := c.post(ctx, pathSignOut, signInRequest{Account: account, Source: source})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// FormsSignInStatus is the Forms API sign-in of account as the daemon
// reads and checks it (source.Login's StoredSignIn, checked).
func (c *Client) FormsSignInStatus(ctx context.Context, account string) (formsauth.Token, error) {
	ans, err := c.askSignedIn(ctx, signedInRequest{Source: sourceForms, Account: account})
	if err != nil {
		return formsauth.Token{}, err
	}
	tok := formsauth.Token{BaseURL: ans.BaseURL, ObtainedAt: ans.ObtainedAt}
	switch {
	case ans.NoToken:
		return tok, app.ErrNoSignIn
	case ans.AuthStatus != 0:
		return tok, &app.SourceError{Kind: app.SourceAuth, Source: sourceForms, Where: ans.BaseURL, Status: ans.AuthStatus}
	case ans.Error != "":
		return tok, errors.New(ans.Error)
	}
	return tok, nil
}

// SignInStatus is the stored sign-in of namespace as the daemon reads it:
// its facts only (the token's secrets stay in the daemon).
func (c *Client) SignInStatus(ctx context.Context, namespace string) (oauth.Token, error) {
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
func (c *Client) askSignedIn(ctx context.Context, req signedInRequest) (signedInAnswer, error) {
	var ans signedInAnswer
	resp, err := c.post(ctx, pathSignedIn, req)
	if err != nil {
		return ans, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return ans, fmt.Errorf("read the daemon's answer: %w", err)
	}
	return ans, nil
}

// Backfill runs req in the daemon: notes and progress as they come, then
// the outcome. A read that ends before the outcome (the daemon stopped, or
// ctx ended) is an error.
func (c *Client) Backfill(ctx context.Context, req BackfillRequest, note func(string), progress func(poller.Progress)) (*Done, error) {
	resp, err := c.post(ctx, pathBackfill, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var ev event
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
