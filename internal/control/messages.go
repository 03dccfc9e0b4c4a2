package control

import (
	"encoding/json"
	"time"

	"github.com/syncd-dev/syncd/internal/oauth"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/status"
)

// BackfillRequest is what `syncd backfill` asks of the daemon.
type BackfillRequest struct {
	Accounts    []string  `json:"accounts,omitempty"` // --account
	Form        string    `json:"form,omitempty"`     // empty: every form of the accounts
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	ToAsked     bool      `json:"to_asked"` // --to given: a cut at now - safety_lag is said
	Concurrency int       `json:"concurrency,omitempty"`
}

// event is one line of the daemon's answer to a backfill (JSON lines): a
// note for the command's stderr, a backfill's progress, or, last, the
// outcome.
type event struct {
	Note     string           `json:"note,omitempty"`
	Progress *poller.Progress `json:"progress,omitempty"`
	Done     *Done            `json:"done,omitempty"`
}

// Done is a backfill's outcome: the exit code the command alone would have
// had, and its summary (or the error that stopped it before any stream
// ran).
type Done struct {
	Code    int                   `json:"code"`
	Error   string                `json:"error,omitempty"`
	Results []status.StreamResult `json:"results,omitempty"`
	Seconds float64               `json:"seconds"`
}

// signInRequest hands the daemon the tokens `syncd auth login` obtained,
// or, with no token, names the sign-in to forget.
type signInRequest struct {
	Account string          `json:"account"`
	Source  string          `json:"source"` // scheduling or forms
	Token   json.RawMessage `json:"token"`
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
