package forms

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/formsauth"
	"github.com/syncd-dev/syncd/internal/httpapi"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/source"
	api "github.com/syncd-dev/syncd/internal/source/forms/api"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/suggest"
	"github.com/syncd-dev/syncd/internal/table"
	"github.com/syncd-dev/syncd/internal/webhook"
)

// Source is the Forms API as the app lists its sources: it opens for an
// account that has forms (a key, or forms_oauth), from the account's
// settings and the source section.
type Source struct {
	// Limiters share one rate limit among the clients of one key: the
	// app's, so that accounts of one key take turns (nil: a limiter per
	// client).
	Limiters *api.Limiters
}

var (
	_ source.Source         = Source{}
	_ source.Endpoints      = Source{}
	_ source.SignIn         = (*Account)(nil)
	_ source.Selector       = (*Account)(nil)
	_ source.Explainer      = (*Account)(nil)
	_ source.WebhookRemover = (*Account)(nil)
)

// Name is the source's name (poller.SourceForms).
func (Source) Name() string { return poller.SourceForms }

// Endpoint is the receiver's side of the forms' webhooks.
func (Source) Endpoint() webhook.Endpoint { return Endpoint{} }

// Credential is the account's Forms API key as it reads now (api_key, or
// the mounted api_key_file): a reload reopens the account when it
// changes. An account with forms_oauth reads its sign-in at each pass.
func (Source) Credential(ac config.Account) (string, error) {
	if ac.FormsOAuth {
		return "", nil
	}
	key, err := APIKey(ac)
	if err != nil && ac.HasForms() {
		return "", err
	}
	return key, nil
}

// Open opens the account's forms; nil when the account has none (no key
// and no forms_oauth). An account with forms_oauth opens without a
// client when its sign-in is missing or unreadable: each pass reads it
// again (SignIn), so that error fails its passes alone, not the opening.
func (s Source) Open(ctx context.Context, env source.Env) (source.Account, error) {
	ac := env.Account
	a := &Account{cfg: env.Config, ac: ac, log: env.Log, obs: env.Observer, limiters: s.Limiters}
	switch {
	case ac.FormsOAuth:
		a.tokens = &Tokens{Store: env.Store, Namespace: ac.Namespace()}
		signInCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = a.SignIn(signInCtx)
		cancel()
	case ac.HasForms():
		c, err := NewAccountClient(env.Config, ac, s.Limiters, env.Log, env.Observer)
		if err != nil {
			return nil, err
		}
		a.client = c
	default:
		return nil, nil
	}
	return a, nil
}

// Account is the forms source opened for an account: its client (for
// forms_oauth, the one its stored sign-in builds) and the selection of
// its forms (forms[], tags, exclude).
type Account struct {
	cfg      *config.Config
	ac       config.Account
	log      *zap.Logger
	obs      httpapi.Observer
	limiters *api.Limiters
	// tokens is the account's sign-in (forms_oauth); nil for a key.
	tokens *Tokens
	// mu guards client and token: a forms_oauth account's passes follow
	// its stored sign-in while other passes read the client.
	mu     sync.Mutex
	client *api.Client
	token  string // the sign-in client was built from
}

// Client is the account's Forms API client now; nil for an account with
// forms_oauth and no usable sign-in.
func (a *Account) Client() *api.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// SignIn makes the client of an account with forms_oauth follow the
// sign-in stored now: a pass after `syncd auth login` uses the new token,
// and an account without one fails its pass alone (a *SignInError). An
// account with a key has nothing to read.
func (a *Account) SignIn(ctx context.Context) error {
	if a.tokens == nil {
		return nil
	}
	tok, err := a.tokens.Load(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.client, a.token = nil, ""
		return &SignInError{Account: a.ac.Name, Err: err}
	}
	if a.client != nil && a.token == tok.AccessToken+" "+tok.BaseURL {
		return nil
	}
	c, err := NewTokenClient(a.cfg, a.ac, tok, a.limiters, a.log, a.obs)
	if err != nil {
		a.client, a.token = nil, ""
		return &SignInError{Account: a.ac.Name, Err: err}
	}
	a.client, a.token = c, tok.AccessToken+" "+tok.BaseURL
	return nil
}

// Jobs are the account's forms: those it lists, or every form of the
// account (those carrying one of its tags, when it names tags), less the
// excluded ones. An account without a client has none.
func (a *Account) Jobs(ctx context.Context) ([]poller.Job, error) {
	client := a.Client()
	if client == nil {
		return nil, nil
	}
	start := a.cfg.Sync.StartDate.Time
	excluded := map[string]bool{}
	for _, id := range a.ac.Exclude {
		excluded[id] = true
	}
	if len(a.ac.Forms) > 0 {
		jobs := make([]poller.Job, 0, len(a.ac.Forms))
		for _, f := range a.ac.Forms {
			if !excluded[f.ID] {
				jobs = append(jobs, JobOf(a.cfg, a.ac, f.ID))
			}
		}
		return jobs, nil
	}
	list, err := client.ListForms(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the forms of account %s (no forms listed means every form): %w", a.ac.Name, err)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].FormID < list[j].FormID })
	jobs := make([]poller.Job, 0, len(list))
	for _, f := range list {
		if excluded[f.FormID] || !HasAnyTag(f.Tags, a.ac.Tags) {
			continue
		}
		jobs = append(jobs, poller.Job{Stream: f.FormID, Start: start})
	}
	return jobs, nil
}

// Streams are the streams of the account's forms (Jobs), read through
// the client of now.
func (a *Account) Streams(ctx context.Context) ([]source.Stream, error) {
	jobs, err := a.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]source.Stream, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, source.Stream{Stream: a.Stream(j), Start: j.Start})
	}
	return out, nil
}

// Stream is the stream of a form's job, read through the client of now.
func (a *Account) Stream(job poller.Job) *Stream {
	return StreamOf(a.cfg, a.ac.Namespace(), a.Client(), job, a.log)
}

// Job is the job of one form of the account (JobOf).
func (a *Account) Job(formID string) poller.Job { return JobOf(a.cfg, a.ac, formID) }

// JobStream is Stream as the source contract names it (source.Jobs).
func (a *Account) JobStream(job poller.Job) poller.Stream { return a.Stream(job) }

// StreamOf is the stream of a form's job of the account of namespace,
// read through client, as the configuration tunes it.
func StreamOf(cfg *config.Config, namespace string, client API, job poller.Job, log *zap.Logger) *Stream {
	return NewStream(client, job.Stream, job.Table, StreamOptions{
		PageSize: cfg.Sync.PageSize, IncludeEditLink: cfg.Sync.IncludeEditLink, Logger: log.Named("poller"),
		Namespace: namespace,
	})
}

// JobOf is the job of one form of account ac: as configured, or with the
// defaults when the configuration does not list it.
func JobOf(cfg *config.Config, ac config.Account, formID string) poller.Job {
	job := poller.Job{Stream: formID, Start: cfg.Sync.StartDate.Time}
	for _, f := range ac.Forms {
		if f.ID == formID {
			job.Table = f.Table
			if !f.StartDate.IsZero() {
				job.Start = f.StartDate.Time
			}
		}
	}
	return job
}

// HasAnyTag reports whether a form carrying tags is selected by want
// (every form when want is empty).
func HasAnyTag(tags, want []string) bool {
	if len(want) == 0 {
		return true
	}
	for _, t := range tags {
		if slices.Contains(want, t) {
			return true
		}
	}
	return false
}

// Check makes sure every id is a form of the account, with one request
// (the account's form list): an *UnknownFormError names the others, with
// the closest ids.
func (a *Account) Check(ctx context.Context, ids []string) error {
	client := a.Client()
	if client == nil {
		// Not signed in (forms_oauth): nothing to check against; the
		// pass says to sign in.
		return nil
	}
	_, err := ListAndCheck(ctx, client, ids)
	return err
}

// ListAndCheck is Check through client, returning the account's forms it
// listed for callers that check more of them (their tags); nil when ids
// is empty.
func ListAndCheck(ctx context.Context, client *api.Client, ids []string) ([]api.FormSummary, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	list, err := client.ListForms(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the account's forms to check the form ids: %w", err)
	}
	known := make([]string, 0, len(list))
	have := make(map[string]bool, len(list))
	for _, f := range list {
		known = append(known, f.FormID)
		have[f.FormID] = true
	}
	var bad UnknownFormError
	for _, id := range ids {
		if !have[id] {
			bad.IDs = append(bad.IDs, id)
			bad.Hint = append(bad.Hint, suggest.Phrase(id, known))
		}
	}
	if len(bad.IDs) > 0 {
		return nil, &bad
	}
	return list, nil
}

// Explain is a refused key or sign-in as the account's failure: which
// setting or command fixes it. Any other failure is left as it is (it
// names its form already).
func (a *Account) Explain(account string, err error) error {
	se := source.AsError(err)
	if se == nil || se.Kind != source.Auth {
		return err
	}
	if a.ac.FormsOAuth {
		return &SignInError{Account: account, Err: se.Err}
	}
	return &KeyError{Account: account, Err: se}
}

// Missing is err, a form's not found, as the error of a configured form
// the account does not have (deleted since, or mistyped), naming the
// closest ids: that form fails, the others sync.
func (a *Account) Missing(ctx context.Context, formID string, err error) error {
	hint := ""
	if list, lerr := a.Client().ListForms(ctx); lerr == nil {
		known := make([]string, 0, len(list))
		for _, f := range list {
			known = append(known, f.FormID)
		}
		if p := suggest.Phrase(formID, known); p != "" {
			hint = " (" + p + ")"
		}
	}
	return &MissingFormError{Form: formID, Hint: hint, Err: err}
}

// NewAccountClient builds the Forms API client of acct with its key;
// clients of one key share a rate limiter through limiters (nil: a
// limiter of their own).
func NewAccountClient(cfg *config.Config, acct config.Account, limiters *api.Limiters, log *zap.Logger, obs api.Observer) (*api.Client, error) {
	key, err := APIKey(acct)
	if err != nil {
		return nil, err
	}
	return newClient(cfg, acct, key, limiters, log, obs)
}

// NewTokenClient is the Forms API client of account acct signed in with
// tok: the token is its Bearer key and the token's base URL its address
// (it wins over the account's base_url: the sign-in says where the
// workspace lives).
func NewTokenClient(cfg *config.Config, acct config.Account, tok formsauth.Token, limiters *api.Limiters, log *zap.Logger, obs api.Observer) (*api.Client, error) {
	acct.BaseURL = tok.BaseURL
	return newClient(cfg, acct, tok.AccessToken, limiters, log, obs)
}

// newClient is the client of acct at its base URL with key.
func newClient(cfg *config.Config, acct config.Account, key string, limiters *api.Limiters, log *zap.Logger, obs api.Observer) (*api.Client, error) {
	c, err := api.New(api.Config{
		Observer:    obs,
		BaseURL:     acct.BaseURL,
		APIKey:      key,
		RateLimit:   cfg.Source.RateLimit,
		MaxAttempts: cfg.Source.MaxAttempts,
		Timeout:     cfg.Source.Timeout.D(),
		Limiters:    limiters,
		Logger:      log.Named("forms"),
		UserAgent:   processUserAgent(),
	})
	if err != nil {
		return nil, fmt.Errorf("set up the Forms API client of account %s: %w", acct.Name, err)
	}
	return c, nil
}

// processUserAgent names this process in its requests: the replicas of a
// shared state each sync their own accounts, and the service's logs (or a
// simulator) can tell which process made a request.
func processUserAgent() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s (%s; pid %d)", api.DefaultUserAgent, host, os.Getpid())
}

// APIKey is the account's Forms API key: api_key, or the content of
// api_key_file (a mounted secret), read now.
func APIKey(acct config.Account) (string, error) {
	if acct.FormsOAuth {
		return "", fmt.Errorf("account %s signs in to the Forms API with OAuth (forms_oauth), not a key: this command reads no sign-in; `syncd once --account %s` does", acct.Name, acct.Name)
	}
	if acct.APIKeyFile == "" {
		return acct.APIKey.Reveal(), nil
	}
	raw, err := os.ReadFile(acct.APIKeyFile)
	if err != nil {
		return "", fmt.Errorf("read the Forms API key of account %s from api_key_file: %w", acct.Name, err)
	}
	key := strings.TrimSpace(string(raw))
	if key == "" {
		return "", fmt.Errorf("the api_key_file of account %s (%s) is empty: mount the key there", acct.Name, acct.APIKeyFile)
	}
	return key, nil
}

// tokenSecret is where the default account's Forms API sign-in lives in
// the state store; another account's is under TokenSecret.
const tokenSecret = "forms-oauth"

// TokenSecret is where the Forms API sign-in (forms_oauth) of the account
// of namespace lives in the state store: named like the account's streams
// (namespace/forms-oauth), so that a store split by account (state.url
// with sharding) keeps it with the account's state.
func TokenSecret(namespace string) string { return table.StreamKey(namespace, tokenSecret) }

// LegacyTokenSecret is where earlier releases kept the sign-in
// (forms/oauth, forms/oauth/NAME). A store split by account took its
// "forms/" for an account named forms, which no syncd claims, so only a
// state that is not split can hold one: Load still reads it there, and
// Save and Delete remove it.
func LegacyTokenSecret(namespace string) string {
	if namespace == "" {
		return "forms/oauth"
	}
	return "forms/oauth/" + namespace
}

// ErrNoSignIn is an account with forms_oauth that has not signed in; it
// matches source.ErrNoSignIn.
var ErrNoSignIn error = noSignIn{}

type noSignIn struct{}

func (noSignIn) Error() string        { return "no Forms API sign-in is stored" }
func (noSignIn) Is(target error) bool { return target == source.ErrNoSignIn }

// Tokens keeps the Forms API sign-in of one account in the state store,
// as the scheduling source's StateTokens keeps its tokens.
type Tokens struct {
	Store state.Store
	// Namespace is the account's (empty: the default account).
	Namespace string
}

// Load returns the stored sign-in, or ErrNoSignIn.
func (t Tokens) Load(ctx context.Context) (formsauth.Token, error) {
	raw, err := t.Store.GetSecret(ctx, TokenSecret(t.Namespace))
	if err != nil {
		return formsauth.Token{}, fmt.Errorf("read the Forms API sign-in from the state: %w", err)
	}
	if raw == nil {
		if raw, err = t.legacy(ctx); err != nil {
			return formsauth.Token{}, err
		}
	}
	if raw == nil {
		return formsauth.Token{}, ErrNoSignIn
	}
	var tok formsauth.Token
	if err := json.Unmarshal(raw, &tok); err != nil || tok.AccessToken == "" || tok.BaseURL == "" {
		return formsauth.Token{}, errors.New("the Forms API sign-in in the state cannot be read: sign in again with `syncd auth login --source forms`")
	}
	return tok, nil
}

// Save stores tok durably.
func (t Tokens) Save(ctx context.Context, tok formsauth.Token) error {
	raw, err := json.Marshal(tok)
	if err != nil {
		return fmt.Errorf("encode the Forms API sign-in: %w", err)
	}
	if err := t.Store.PutSecret(ctx, TokenSecret(t.Namespace), raw); err != nil {
		return fmt.Errorf("store the Forms API sign-in: %w", err)
	}
	return t.dropLegacy(ctx)
}

// Delete forgets the sign-in.
func (t Tokens) Delete(ctx context.Context) error {
	if err := t.Store.PutSecret(ctx, TokenSecret(t.Namespace), nil); err != nil {
		return fmt.Errorf("forget the Forms API sign-in: %w", err)
	}
	return t.dropLegacy(ctx)
}

// legacy is the sign-in under its earlier name, nil when there is none. A
// store split by account refuses the name (it names no account of it): it
// never held one there.
func (t Tokens) legacy(ctx context.Context) ([]byte, error) {
	raw, err := t.Store.GetSecret(ctx, LegacyTokenSecret(t.Namespace))
	var nc *state.NotClaimedError
	if errors.As(err, &nc) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the Forms API sign-in from the state: %w", err)
	}
	return raw, nil
}

// dropLegacy removes the sign-in under its earlier name, if any, so that
// a logout forgets it and a new login is the only one left.
func (t Tokens) dropLegacy(ctx context.Context) error {
	raw, err := t.legacy(ctx)
	if err != nil || raw == nil {
		return err
	}
	if err := t.Store.PutSecret(ctx, LegacyTokenSecret(t.Namespace), nil); err != nil {
		return fmt.Errorf("remove the Forms API sign-in kept under its earlier name: %w", err)
	}
	return nil
}

// RemoveWebhook deletes a form's webhook by its recorded id; one gone
// already is not an error.
func (a *Account) RemoveWebhook(ctx context.Context, id string) error {
	client := a.Client()
	if client == nil {
		// Without a sign-in the account reads no forms now: the words
		// `webhooks remove` has always said for an account that does not.
		return fmt.Errorf("account %s no longer reads %s: its webhook %s stays registered; remove it at the service", a.ac.Name, poller.SourceForms, id)
	}
	return DeleteWebhook(ctx, client, id)
}

// DeleteWebhook deletes a Forms API webhook by its recorded id through
// client; one gone already is not an error.
func DeleteWebhook(ctx context.Context, client *api.Client, id string) error {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return fmt.Errorf("the recorded webhook id %q is not a number", id)
	}
	err = client.DeleteWebhook(ctx, n)
	if source.IsNotFound(err, "webhook", strconv.FormatInt(n, 10)) {
		return nil
	}
	return err
}
