// Package config loads syncd's YAML configuration: ${ENV} expansion in values,
// strict keys (an unknown or misspelt key is an error naming it and its line),
// defaults, and validation with one clear sentence per problem.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/syncd-dev/syncd/internal/table"
)

// Config is the whole configuration file.
type Config struct {
	Source Source       `yaml:"source"`
	Forms  []FormConfig `yaml:"forms"`
	Sync   Sync         `yaml:"sync"`
	Sink   Sink         `yaml:"sink"`
	State  State        `yaml:"state"`
	// Scheduling, when present, also syncs the bookings of the scheduling
	// API (Cal.com API v2), signed in with OAuth 2.0 by `syncd auth login`.
	Scheduling *Scheduling `yaml:"scheduling,omitempty"`
	// FormsOAuth, when present, is the Forms API's OAuth app every account
	// with forms_oauth: true signs in with (`syncd auth login --source
	// forms`), instead of an API key.
	FormsOAuth *FormsOAuth `yaml:"forms_oauth,omitempty"`
	Log        Log         `yaml:"log"`
	Server     Server      `yaml:"server"`
	// Accounts are the Forms API workspaces and scheduling users one syncd
	// serves. A file without an accounts list is one account named
	// "default", built from source, forms and scheduling.
	Accounts []Account `yaml:"accounts"`

	// lines maps each dotted key of the file (forms[0].id, sink.parquet.path)
	// to its line, so that validation errors name the line too.
	lines map[string]int
}

// Account is one workspace of the Forms API and/or one user of the
// scheduling API. Its name is part of every stream's identity: it
// namespaces the account's state and its output.
type Account struct {
	Name string `yaml:"name"`
	// BaseURL is the account's deployment (US, EU, self-hosted); default
	// source.base_url.
	BaseURL string `yaml:"base_url"`
	// APIKey or APIKeyFile (a mounted secret, read at every pass so a
	// rotated key is picked up) is the Forms API key; an account without
	// either syncs no forms.
	APIKey     Secret `yaml:"api_key"`
	APIKeyFile string `yaml:"api_key_file"`
	// FormsOAuth signs the account in to the Forms API with the OAuth app
	// of the forms_oauth section instead of a key: its token, and the
	// base_url that comes with it, live in the state store.
	FormsOAuth bool `yaml:"forms_oauth"`
	// Forms lists forms by id (with their table, start date and schedule);
	// Tags adds every form carrying one of these tags; with neither, every
	// form of the account. Exclude removes form ids from the selection.
	Forms   []FormConfig `yaml:"forms"`
	Tags    []string     `yaml:"tags"`
	Exclude []string     `yaml:"exclude"`
	// Scheduling signs this account's user in to the scheduling API with
	// the one OAuth client of the scheduling section, and syncs its
	// bookings.
	Scheduling bool `yaml:"scheduling"`
}

// DefaultAccount is the name of the account of a configuration without an
// accounts list. Its state and output live where a single-account syncd
// always kept them, and an accounts list may name it to keep them there.
const DefaultAccount = "default"

// HasForms reports whether the account syncs forms (it has a key or signs
// in with OAuth).
func (a *Account) HasForms() bool { return a.APIKey != "" || a.APIKeyFile != "" || a.FormsOAuth }

// Namespace is what separates the account's streams in the state and its
// tables in the output: empty for the default account (the layout of a
// single-account syncd), the name otherwise.
func (a *Account) Namespace() string {
	if a.Name == DefaultAccount {
		return ""
	}
	return a.Name
}

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

// Sync tunes how windows are planned and fetched.
type Sync struct {
	StartDate       Date     `yaml:"start_date"`
	SafetyLag       Duration `yaml:"safety_lag"`
	MaxRowsPerBatch int      `yaml:"max_rows_per_batch"`
	// ChunkRows bounds the rows of a batch held in memory; a larger batch
	// is spooled to SpoolDir (default: the system's temporary folder).
	ChunkRows   int    `yaml:"chunk_rows"`
	SpoolDir    string `yaml:"spool_dir"`
	PageSize    int    `yaml:"page_size"`
	Concurrency int    `yaml:"concurrency"`
	// MaxBatches bounds the batches being fetched at once across every
	// account (memory and CPU); each waits its turn, so no account's
	// backfill starves another's incremental pass.
	MaxBatches      int      `yaml:"max_batches"`
	IncludeEditLink bool     `yaml:"include_edit_link"`
	Schedule        string   `yaml:"schedule"`
	Jitter          Duration `yaml:"jitter"`
	// ShutdownGrace is how long SIGTERM waits for batches in flight to
	// commit before abandoning them (their intents are resolved on restart).
	ShutdownGrace Duration `yaml:"shutdown_grace"`
	// Lookback is how far back edits, deletions and late imports are found:
	// the state keeps the version of every row this recent, and a
	// reconcile reads these committed windows again (0: neither).
	Lookback Duration `yaml:"lookback"`
	// ReconcileEvery is how often a pass also reconciles a form's lookback
	// (0: every pass).
	ReconcileEvery Duration `yaml:"reconcile_every"`
	// Webhooks lets deliveries ring the bell for an immediate pass of their
	// stream (README, "Webhooks"); the scheduled passes stay the safety net.
	Webhooks Webhooks `yaml:"webhooks"`
}

// Webhooks configures `syncd run`'s webhook receiver and the registration
// of its webhooks with the services.
type Webhooks struct {
	// PublicURL is where the Forms and scheduling services reach this
	// syncd's server (server.addr); empty: no webhooks.
	PublicURL string `yaml:"public_url"`
	// Secret derives every path token and every signing secret (one per
	// form, one per scheduling user), so that none is stored.
	Secret Secret `yaml:"secret"`
	// MaxBody is the largest delivery body read, in bytes.
	MaxBody int64 `yaml:"max_body"`
	// Debounce is how long a first delivery waits for others of its
	// stream before the pass it triggers starts.
	Debounce Duration `yaml:"debounce"`
}

// Enabled reports whether the webhooks are configured.
func (w Webhooks) Enabled() bool { return w.PublicURL != "" }

// Sink chooses and configures the destination.
type Sink struct {
	Type     string        `yaml:"type"`
	Parquet  ParquetSink   `yaml:"parquet"`
	BigQuery *BigQuerySink `yaml:"bigquery,omitempty"`
}

// ParquetSink writes Parquet files under a folder.
type ParquetSink struct {
	Path         string `yaml:"path"`
	Compression  string `yaml:"compression"`
	RowGroupRows int    `yaml:"row_group_rows"`
	// Partition is the Hive folder layout of a new table: auto (the
	// default: chosen once per table, at its first batch, from its
	// density), none (files in the table's folder), year
	// (submission_year=YYYY), month (submission_month=YYYY-MM) or day
	// (submission_date=YYYY-MM-DD). A table keeps the layout it was first
	// written with; the state records it.
	Partition string `yaml:"partition"`
}

// BigQuerySink loads into BigQuery tables (see the BigQuery issue).
type BigQuerySink struct {
	Project     string   `yaml:"project"`
	Dataset     string   `yaml:"dataset"`
	Location    string   `yaml:"location"`
	TablePrefix string   `yaml:"table_prefix"`
	Clustering  []string `yaml:"clustering"`
	// Endpoint replaces BigQuery's REST endpoint: a private endpoint, or a
	// test server. An http:// endpoint is called without credentials.
	Endpoint string `yaml:"endpoint"`
	// MaxAttempts bounds the tries of one batch's load on temporary
	// failures (5xx, backendError, rateLimitExceeded, no answer); 0: 5.
	MaxAttempts int `yaml:"max_attempts"`
	// MinBackoff and MaxBackoff bound the pause between tries, and the
	// polling of a running job; 0: 1s and 30s (min_backoff when longer).
	MinBackoff Duration `yaml:"min_backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
}

// maxClustering is BigQuery's limit on a table's clustering columns.
const maxClustering = 4

// setDefaults fills what a sink.bigquery section leaves out (or sets to
// 0), so that `syncd config` shows the values the sink uses; the sink
// falls back to the same ones for callers that leave them 0.
func (b *BigQuerySink) setDefaults() {
	if b == nil {
		return
	}
	if b.MaxAttempts == 0 {
		b.MaxAttempts = 5
	}
	if b.MinBackoff == 0 {
		b.MinBackoff = Duration(time.Second)
	}
	if b.MaxBackoff == 0 {
		// The sink never pauses less than min_backoff.
		b.MaxBackoff = max(Duration(30*time.Second), b.MinBackoff)
	}
}

// datasetID is what BigQuery takes as a dataset id.
var datasetID = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// datasetIDProblem says what is wrong with a dataset id, with the fix, or
// "" when BigQuery takes it.
func datasetIDProblem(id string) string {
	if len(id) > 1024 {
		return fmt.Sprintf("is %d characters long: a BigQuery dataset id has at most 1024 (letters, digits and underscores)", len(id))
	}
	if !datasetID.MatchString(id) {
		fixed := strings.Map(func(r rune) rune {
			if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '_'
		}, id)
		return fmt.Sprintf("%q is not a BigQuery dataset id: use letters, digits and underscores only (at most 1024), e.g. %s", id, fixed)
	}
	return ""
}

// State is where checkpoints and pinned schemas live: a local bbolt file
// (Path, the default), or an object in a GCS bucket (URL).
type State struct {
	Path string `yaml:"path"`
	// URL, when set, keeps the state in an object (gs://bucket/prefix/syncd-state)
	// instead of Path, written with compare-and-swap, with a lease object
	// beside it keeping one writer at a time.
	URL string `yaml:"url"`
	// LeaseTTL is how long a writer's lease outlives its last renewal
	// (renewed every third of it); a syncd that died is taken over after it.
	LeaseTTL Duration `yaml:"lease_ttl"`
	// Shared says that several syncd processes share this state (replicas
	// of `syncd run`): each claims a fair share of the accounts, and takes
	// over those of a replica that died or stopped. Needs URL.
	Shared bool `yaml:"shared"`
}

// Scheduling is the scheduling API and the OAuth client syncd signs in
// with. Tokens are kept in the state store, never here.
type Scheduling struct {
	BaseURL      string `yaml:"base_url"`
	AuthorizeURL string `yaml:"authorize_url"`
	ClientID     string `yaml:"client_id"`
	// ClientSecret is empty for a public client, which signs in with PKCE.
	ClientSecret Secret `yaml:"client_secret"`
	// ClientSecretNext is the second secret during a rotation: either one
	// is tried when the other is refused, and the log says which works.
	ClientSecretNext Secret `yaml:"client_secret_next"`
	// RedirectURI is where `syncd auth login` waits for the code: a
	// loopback http URL registered with the client.
	RedirectURI string `yaml:"redirect_uri"`
	// Scopes asked for; empty for a legacy client (no scope parameter).
	Scopes      []string `yaml:"scopes"`
	RateLimit   float64  `yaml:"rate_limit"`
	MaxAttempts int      `yaml:"max_attempts"`
	Timeout     Duration `yaml:"timeout"`
	Bookings    Bookings `yaml:"bookings"`
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

// Bookings is the bookings stream.
type Bookings struct {
	Table     string `yaml:"table"`
	StartDate Date   `yaml:"start_date"` // the earliest change synced; zero: all of them
}

// setDefaults fills what a scheduling section leaves out.
func (s *Scheduling) setDefaults() {
	d := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	d(&s.BaseURL, "https://api.cal.com")
	d(&s.AuthorizeURL, "https://app.cal.com/auth/oauth2/authorize")
	d(&s.RedirectURI, "http://127.0.0.1:8976/callback")
	d(&s.Bookings.Table, "bookings")
	if s.Scopes == nil {
		s.Scopes = []string{"BOOKING_READ", "PROFILE_READ"}
	}
	if s.RateLimit == 0 {
		s.RateLimit = 2
	}
	if s.MaxAttempts == 0 {
		s.MaxAttempts = 6
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(15 * time.Second)
	}
}

// Log configures zap.
type Log struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"` // auto, json, console
}

// Server is the daemon's HTTP listener for metrics and health.
type Server struct {
	Addr string `yaml:"addr"`
	// UnreadyAfter is how long a form's passes may keep failing before
	// /readyz reports the daemon unready.
	UnreadyAfter Duration `yaml:"unready_after"`
	// PublicURL is where people's browsers reach this syncd: the connect
	// page (PublicURL/connect) and its OAuth callback
	// (PublicURL/connect/callback, registered with the OAuth client).
	PublicURL string `yaml:"public_url"`
	// ConnectSecret signs the connect links `syncd accounts link` prints,
	// one per account; empty: no connect page.
	ConnectSecret Secret `yaml:"connect_secret"`
}

// Defaults are applied to every key the file leaves out.
func Defaults() Config {
	return Config{
		Source: Source{
			BaseURL:     "https://api.fillout.com/v1/api",
			APIKey:      "${FORMS_API_KEY}",
			RateLimit:   5,
			MaxAttempts: 6,
			Timeout:     Duration(15 * time.Second),
		},
		Sync: Sync{
			SafetyLag:       Duration(2 * time.Minute),
			MaxRowsPerBatch: 50000,
			ChunkRows:       4096,
			PageSize:        150,
			Concurrency:     4,
			MaxBatches:      16,
			Schedule:        "*/15 * * * *",
			Jitter:          Duration(10 * time.Second),
			ShutdownGrace:   Duration(30 * time.Second),
			Lookback:        Duration(30 * 24 * time.Hour),
			ReconcileEvery:  Duration(24 * time.Hour),
			Webhooks:        Webhooks{MaxBody: 1 << 20, Debounce: Duration(500 * time.Millisecond)},
		},
		Sink: Sink{
			Type:    "parquet",
			Parquet: ParquetSink{Path: "./out", Compression: "zstd", RowGroupRows: 65536, Partition: "auto"},
		},
		State:  State{Path: "./state/syncd.db", LeaseTTL: Duration(30 * time.Second)},
		Log:    Log{Level: "info", Format: "auto"},
		Server: Server{Addr: "127.0.0.1:9464", UnreadyAfter: Duration(30 * time.Minute)},
	}
}

// isBucketScheme reports whether sink.parquet.path may have URL scheme s.
func isBucketScheme(s string) bool {
	switch s {
	case "gs", "s3", "azblob", "file":
		return true
	}
	return false
}

// Error is a configuration problem: it names the file, the key and the line.
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("config")
	if e.File != "" {
		b.WriteString(" " + e.File)
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": " + e.Key)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Load reads the file at path (or, when path is empty, only the defaults and
// the environment), expands ${ENV} references in values and validates.
// lookupEnv is os.LookupEnv in production and a map in tests.
func Load(path string, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg := Defaults()
	if path != "" {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		if err := decode(path, raw, &cfg, lookupEnv); err != nil {
			return nil, err
		}
	}
	cfg.setSectionDefaults()
	if err := cfg.expandSecrets(path, lookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.validate(path); err != nil {
		return nil, err
	}
	if path != "" {
		dir, err := filepath.Abs(filepath.Dir(path))
		if err != nil {
			return nil, fmt.Errorf("resolve the folder of config %s: %w", path, err)
		}
		cfg.resolvePaths(dir)
	}
	return &cfg, nil
}

// resolvePaths makes the relative local paths of a configuration loaded from
// a file (the state file, the Parquet folder, the spool folder; defaults
// included) relative to the file's folder, not to the working directory: two
// runs of one config from two folders must share one state, or the second
// writes every row a second time into the same output.
func (c *Config) resolvePaths(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if c.State.URL == "" {
		c.State.Path = abs(c.State.Path)
	}
	if !strings.Contains(c.Sink.Parquet.Path, "://") {
		c.Sink.Parquet.Path = abs(c.Sink.Parquet.Path)
	}
	c.Sync.SpoolDir = abs(c.Sync.SpoolDir)
	for i := range c.Accounts {
		c.Accounts[i].APIKeyFile = abs(c.Accounts[i].APIKeyFile)
	}
}

// AccountList is every account the configuration serves: its accounts
// list, or the one account named "default" that source, forms and
// scheduling describe.
func (c *Config) AccountList() []Account {
	if len(c.Accounts) > 0 {
		out := append([]Account(nil), c.Accounts...)
		for i := range out {
			if out[i].BaseURL == "" {
				out[i].BaseURL = c.Source.BaseURL
			}
		}
		return out
	}
	return []Account{{Name: DefaultAccount, BaseURL: c.Source.BaseURL, APIKey: c.Source.APIKey, Forms: c.Forms, Scheduling: c.Scheduling != nil}}
}

// MultiAccount reports whether the configuration has an accounts list.
func (c *Config) MultiAccount() bool { return len(c.Accounts) > 0 }

// Parse is Load for a configuration held in memory (tests, fuzzing).
func Parse(name string, raw []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	cfg := Defaults()
	if err := decode(name, raw, &cfg, lookupEnv); err != nil {
		return nil, err
	}
	cfg.setSectionDefaults()
	if err := cfg.expandSecrets(name, lookupEnv); err != nil {
		return nil, err
	}
	if err := cfg.validate(name); err != nil {
		return nil, err
	}
	return &cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)

// expand replaces ${VAR} and ${VAR:-default} in s. A missing variable without
// a default is an error, so a typo never silently becomes "".
func expand(s string, lookupEnv func(string) (string, bool)) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(m string) string {
		sub := envRef.FindStringSubmatch(m)
		if v, ok := lookupEnv(sub[1]); ok {
			return v
		}
		if sub[2] != "" {
			return sub[3]
		}
		missing = append(missing, sub[1])
		return ""
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set: export it or set a default with ${%s:-value}", missing[0], missing[0])
	}
	return out, nil
}

// secretKeys are the keys of type Secret (accounts[].api_key for every
// account's): expandNode leaves them alone, and expandSecrets expands them
// after decoding, so that their values never reach a YAML error and are
// expanded once (a value holding "${" stays as it is).
var secretKeys = keysOfType(reflect.TypeOf(Secret("")))

// listIndex is the index of a list item in a dotted key (forms[0]).
var listIndex = regexp.MustCompile(`\[\d+\]`)

func isSecretKey(path string) bool { return secretKeys[listIndex.ReplaceAllString(path, "[]")] }

// setSectionDefaults fills what the optional sections the file has
// (scheduling, forms_oauth, sink.bigquery) leave out.
func (c *Config) setSectionDefaults() {
	if c.Scheduling != nil {
		c.Scheduling.setDefaults()
	}
	if c.FormsOAuth != nil {
		c.FormsOAuth.setDefaults()
	}
	c.Sink.BigQuery.setDefaults()
}

// expandSecrets expands ${ENV} in every secret; an unset variable is an
// error naming the key and its line. With an accounts list, source.api_key
// is not used: its default (${FORMS_API_KEY}) must not be required.
func (c *Config) expandSecrets(file string, lookupEnv func(string) (string, bool)) error {
	type secret struct {
		key string
		v   *Secret
	}
	var secrets []secret
	if len(c.Accounts) == 0 {
		secrets = append(secrets, secret{"source.api_key", &c.Source.APIKey})
	}
	secrets = append(secrets, secret{"server.connect_secret", &c.Server.ConnectSecret}, secret{"sync.webhooks.secret", &c.Sync.Webhooks.Secret})
	for i := range c.Accounts {
		secrets = append(secrets, secret{fmt.Sprintf("accounts[%d].api_key", i), &c.Accounts[i].APIKey})
	}
	if s := c.Scheduling; s != nil {
		secrets = append(secrets, secret{"scheduling.client_secret", &s.ClientSecret}, secret{"scheduling.client_secret_next", &s.ClientSecretNext})
	}
	if f := c.FormsOAuth; f != nil {
		secrets = append(secrets, secret{"forms_oauth.client_secret", &f.ClientSecret})
	}
	for _, s := range secrets {
		if name, ok := bareVariable(string(*s.v)); ok {
			return &Error{File: file, Line: c.lines[s.key], Key: s.key, Msg: fmt.Sprintf("$%s would be taken literally: only ${VAR} is read from the environment; write \"${%s}\"", name, name)}
		}
		v, err := expandSecret(*s.v, lookupEnv)
		if err != nil {
			return &Error{File: file, Line: c.lines[s.key], Key: s.key, Msg: err.Error()}
		}
		*s.v = v
	}
	return nil
}

var bareVar = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)

// bareVariable reports whether s is a shell-style $VAR, which the config
// does not expand (only ${VAR}), and names the variable.
func bareVariable(s string) (string, bool) {
	m := bareVar.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	return m[1], true
}

func expandSecret(s Secret, lookupEnv func(string) (string, bool)) (Secret, error) {
	v, err := expand(string(s), lookupEnv)
	return Secret(v), err
}

func decode(name string, raw []byte, cfg *Config, lookupEnv func(string) (string, bool)) (err error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // an empty file is all defaults
		}
		return &Error{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if err := checkKeys(name, root, reflect.TypeOf(*cfg), ""); err != nil {
		return err
	}
	if err := expandNode(name, root, "", lookupEnv); err != nil {
		return err
	}
	cfg.lines = map[string]int{}
	keyLines(root, "", cfg.lines)
	if err := root.Decode(cfg); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			// yaml names the line, not the key: name it too, as every other
			// config error does.
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				msgs[i] = nameKey(root, m)
			}
			return &Error{File: name, Msg: strings.Join(msgs, "; ")}
		}
		return &Error{File: name, Msg: nameKey(root, err.Error())}
	}
	return nil
}

// expandNode expands ${ENV} in every scalar value except the secrets, which
// expandSecrets expands after decoding so that their values never reach a
// YAML error.
func expandNode(file string, n *yaml.Node, path string, lookupEnv func(string) (string, bool)) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := expandNode(file, n.Content[i+1], join(path, n.Content[i].Value), lookupEnv); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := expandNode(file, c, fmt.Sprintf("%s[%d]", path, i), lookupEnv); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if isSecretKey(path) || !strings.Contains(n.Value, "${") {
			return nil
		}
		v, err := expand(n.Value, lookupEnv)
		if err != nil {
			return &Error{File: file, Line: n.Line, Key: path, Msg: err.Error()}
		}
		n.Value = v
		if n.Style == 0 {
			n.Tag = "" // let YAML resolve the expanded text's type (numbers, bools)
		}
	}
	return nil
}

// keyLines records the line of every key under n, by dotted path.
func keyLines(n *yaml.Node, path string, lines map[string]int) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			lines[p] = n.Content[i].Line
			keyLines(n.Content[i+1], p, lines)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			keyLines(c, p, lines)
		}
	}
}

// Line is the line of a dotted key in the file, or 0 when the file does
// not set it.
func (c *Config) Line(key string) int { return c.lines[key] }

// nameKey adds the key to a decoding message that names only its line
// ("line 2: ..." becomes "line 2: sync.jitter: ...").
func nameKey(root *yaml.Node, msg string) string {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return msg
	}
	msg = plainTypeError(msg)
	key := keyAtLine(root, "", line)
	if key == "" {
		return msg
	}
	return strings.Replace(msg, fmt.Sprintf("line %d:", line), fmt.Sprintf("line %d: %s:", line, key), 1)
}

var yamlTypeError = regexp.MustCompile("cannot unmarshal !!\\w+ (`[^`]*`) into (\\w+)")

// plainTypeError says yaml's "cannot unmarshal !!str `fast` into float64"
// in words: "`fast` is not a number".
func plainTypeError(msg string) string {
	return yamlTypeError.ReplaceAllStringFunc(msg, func(m string) string {
		sub := yamlTypeError.FindStringSubmatch(m)
		switch t := sub[2]; {
		case strings.HasPrefix(t, "float"):
			return sub[1] + " is not a number: write one, such as 5 or 0.5"
		case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
			return sub[1] + " is not a whole number: write one, such as 8"
		case t == "bool":
			return sub[1] + " is not true or false"
		}
		return m
	})
}

// keyAtLine is the dotted key whose value starts on line, or "".
func keyAtLine(n *yaml.Node, path string, line int) string {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			if v.Kind == yaml.ScalarNode && v.Line == line {
				return p
			}
			if found := keyAtLine(v, p, line); found != "" {
				return found
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			if c.Kind == yaml.ScalarNode && c.Line == line {
				return p
			}
			if found := keyAtLine(c, p, line); found != "" {
				return found
			}
		}
	}
	return ""
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkKeys rejects keys that do not exist in the configuration structure,
// naming the key, its line and the keys that would be valid there.
func checkKeys(file string, n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch n.Kind {
	case yaml.MappingNode:
		if t.Kind() == reflect.Map {
			return nil
		}
		if t.Kind() != reflect.Struct {
			return nil // a scalar type given a mapping: Decode reports it with its line
		}
		fields := map[string]reflect.Type{}
		var names []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			fields[tag] = f.Type
			names = append(names, tag)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			ft, ok := fields[k.Value]
			if !ok && path == "" && k.Value == "webhook" {
				return &Error{File: file, Line: k.Line, Key: "webhook",
					Msg: "syncd never used this key and no longer accepts it: remove the webhook section (webhooks are configured under sync.webhooks, see the README)"}
			}
			if !ok {
				where := "at the top level"
				if path != "" {
					where = "under " + path
				}
				return &Error{File: file, Line: k.Line, Key: join(path, k.Value),
					Msg: fmt.Sprintf("unknown key %s: valid keys are %s", where, strings.Join(names, ", "))}
			}
			if err := checkKeys(file, n.Content[i+1], ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice {
			for i, c := range n.Content {
				if err := checkKeys(file, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (c *Config) validate(file string) error {
	bad := func(key, msg string) error {
		line := c.lines[key]
		for k := key; line == 0 && strings.Contains(k, "."); {
			k = k[:strings.LastIndex(k, ".")]
			line = c.lines[k] // a key the file leaves out: the line of its section
		}
		return &Error{File: file, Line: line, Key: key, Msg: msg}
	}
	if !isHTTPURL(c.Source.BaseURL) {
		return bad("source.base_url", fmt.Sprintf("%q is not an http(s) URL: set it to your account's API base, e.g. https://api.fillout.com/v1/api", c.Source.BaseURL))
	}
	if len(c.Accounts) == 0 && c.Source.APIKey == "" {
		return bad("source.api_key", "the API key is empty: export FORMS_API_KEY (or set source.api_key to ${YOUR_VARIABLE})")
	}
	if err := c.validateAccounts(bad); err != nil {
		return err
	}
	if !positiveFinite(c.Source.RateLimit) {
		return bad("source.rate_limit", fmt.Sprintf("must be a positive number of requests per second (the service allows 5), not %v", c.Source.RateLimit))
	}
	if c.Source.MaxAttempts < 1 {
		return bad("source.max_attempts", "must be at least 1")
	}
	if c.Source.Timeout <= 0 {
		return bad("source.timeout", "must be a positive duration, e.g. 60s (how long one request may take)")
	}
	for _, d := range []struct {
		key string
		v   Duration
	}{{"sync.jitter", c.Sync.Jitter}, {"sync.shutdown_grace", c.Sync.ShutdownGrace}, {"state.lease_ttl", c.State.LeaseTTL},
		{"sync.lookback", c.Sync.Lookback}, {"sync.reconcile_every", c.Sync.ReconcileEvery},
		{"server.unready_after", c.Server.UnreadyAfter}} {
		if d.v < 0 {
			return bad(d.key, "must not be negative")
		}
	}
	if c.Sync.SafetyLag < 0 {
		return bad("sync.safety_lag", "must not be negative")
	}
	if c.Sync.MaxRowsPerBatch < 1 {
		return bad("sync.max_rows_per_batch", "must be at least 1")
	}
	if c.Sync.ChunkRows < 1 {
		return bad("sync.chunk_rows", "must be at least 1")
	}
	if c.Sync.PageSize < 1 || c.Sync.PageSize > 150 {
		return bad("sync.page_size", "must be between 1 and 150 (the API's limit)")
	}
	if c.Sync.Concurrency < 1 {
		return bad("sync.concurrency", "must be at least 1")
	}
	if c.Sync.MaxBatches < 1 {
		return bad("sync.max_batches", "must be at least 1")
	}
	if err := checkSchedule(c.Sync.Schedule); err != nil {
		return bad("sync.schedule", err.Error())
	}
	if err := validateForms(c.Forms, "forms", c.bookingsTable(c.Scheduling != nil), bad); err != nil {
		return err
	}
	return c.validateRest(bad)
}

// bookingsTable is the table of the bookings of an account that syncs
// them (scheduling), else "".
func (c *Config) bookingsTable(scheduling bool) string {
	if !scheduling || c.Scheduling == nil {
		return ""
	}
	return c.Scheduling.Bookings.Table
}

// validateForms checks a forms list (the top level's, or an account's);
// bookings is the table of the account's bookings ("": none).
func validateForms(list []FormConfig, at, bookings string, bad func(key, msg string) error) error {
	seenID := map[string]bool{}
	// seenTable is the index of the form writing each table, explicit or
	// default: two forms in one table mix their rows, and a refresh of
	// either removes both.
	seenTable := map[string]int{}
	for i, f := range list {
		key := fmt.Sprintf("%s[%d]", at, i)
		if f.ID == "" {
			return bad(key+".id", "every form needs an id (the form's public id, see `syncd forms`)")
		}
		if seenID[f.ID] {
			return bad(key+".id", fmt.Sprintf("form %s is listed twice", f.ID))
		}
		seenID[f.ID] = true
		if f.Table != "" {
			if !tableName.MatchString(f.Table) || len(f.Table) > 1024 {
				return bad(key+".table", fmt.Sprintf("%q is not a valid table name: use letters, digits and _ (at most 1024), starting with a letter or _", f.Table))
			}
		}
		name := effectiveTable(f)
		if j, ok := seenTable[strings.ToLower(name)]; ok {
			other := list[j]
			// Name a table key when there is one: that is what to change.
			k := key + ".id"
			switch {
			case f.Table != "":
				k = key + ".table"
			case other.Table != "":
				k = fmt.Sprintf("%s[%d].table", at, j)
			}
			return bad(k, fmt.Sprintf("forms %s and %s would both write table %s (%s), and a refresh of one would remove the other's rows: give one of them a table of its own",
				other.ID, f.ID, name, tableOrigin(other, f)))
		}
		seenTable[strings.ToLower(name)] = i
		if bookings != "" && strings.EqualFold(name, bookings) {
			k := key + ".table"
			if f.Table == "" {
				k = "scheduling.bookings.table"
			}
			return bad(k, fmt.Sprintf("form %s and the bookings would both write table %s, and a refresh of either would remove the other's rows: give the form a table of its own, or set scheduling.bookings.table", f.ID, name))
		}
		if f.Schedule != "" {
			if err := checkSchedule(f.Schedule); err != nil {
				return bad(key+".schedule", err.Error())
			}
		}
	}
	return nil
}

// effectiveTable is the table a form is written to: its table, or the rule
// of poller.DefaultTable (form_ and the folded id), which this leaf package
// does not import.
func effectiveTable(f FormConfig) string {
	if f.Table != "" {
		return f.Table
	}
	return "form_" + table.SanitizeName(f.ID)
}

// tableOrigin says where the shared table of forms a and b comes from.
func tableOrigin(a, b FormConfig) string {
	switch {
	case a.Table != "" && b.Table != "":
		return "the table of both"
	case a.Table != "":
		return fmt.Sprintf("the table of %s, and the default of %s, which sets none", a.ID, b.ID)
	case b.Table != "":
		return fmt.Sprintf("the default of %s, which sets none, and the table of %s", a.ID, b.ID)
	}
	return "the default of both: their ids fold to one name"
}

func (c *Config) validateRest(bad func(key, msg string) error) error {
	switch c.Sink.Type {
	case "parquet":
		if c.Sink.Parquet.Path == "" {
			return bad("sink.parquet.path", "is empty: set the folder (or bucket URL) to write Parquet files to")
		}
		if p := c.Sink.Parquet.Path; strings.Contains(p, "://") {
			if u, err := url.Parse(p); err != nil || !isBucketScheme(u.Scheme) || u.Host == "" && u.Scheme != "file" || u.Scheme == "file" && (u.Path == "" || u.Path == "/") {
				return bad("sink.parquet.path", fmt.Sprintf("%q is not a bucket URL: use gs://bucket/prefix, s3://bucket/prefix?region=..., azblob://container/prefix or file:///abs/path, or a local folder", p))
			}
		}
		switch c.Sink.Parquet.Compression {
		case "zstd", "snappy", "none":
		default:
			return bad("sink.parquet.compression", fmt.Sprintf("%q is not one of zstd, snappy, none", c.Sink.Parquet.Compression))
		}
		if c.Sink.Parquet.RowGroupRows < 1 {
			return bad("sink.parquet.row_group_rows", "must be at least 1")
		}
		switch c.Sink.Parquet.Partition {
		case "auto", "day", "month", "year", "none":
		default:
			return bad("sink.parquet.partition", fmt.Sprintf("%q is not one of auto (the default: each new table's density chooses), none, year, month, day", c.Sink.Parquet.Partition))
		}
	case "bigquery":
		bq := c.Sink.BigQuery
		if bq == nil || bq.Project == "" || bq.Dataset == "" {
			return bad("sink.bigquery", "needs project and dataset")
		}
		if msg := datasetIDProblem(bq.Dataset); msg != "" {
			return bad("sink.bigquery.dataset", msg)
		}
		if e := bq.Endpoint; e != "" {
			if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad("sink.bigquery.endpoint", fmt.Sprintf("%q is not an http(s) URL: leave it out to use BigQuery itself", e))
			}
		}
		if bq.MaxAttempts < 0 || bq.MinBackoff < 0 || bq.MaxBackoff < 0 {
			return bad("sink.bigquery", "max_attempts, min_backoff and max_backoff cannot be negative")
		}
		// Left out, max_backoff is at least min_backoff; set below it, the
		// sink would pause min_backoff anyway.
		if bq.MaxBackoff < bq.MinBackoff {
			return bad("sink.bigquery.max_backoff", fmt.Sprintf("%s is shorter than min_backoff (%s), the first pause between tries: raise max_backoff, or lower min_backoff (1s when left out)",
				time.Duration(bq.MaxBackoff), time.Duration(bq.MinBackoff)))
		}
		if n := len(bq.Clustering); n > maxClustering {
			return bad("sink.bigquery.clustering", fmt.Sprintf("names %d columns, but BigQuery clusters a table on at most %d: keep the %d that queries filter on most", n, maxClustering, maxClustering))
		}
		// The loads are Parquet files of sink.parquet.compression.
		switch c.Sink.Parquet.Compression {
		case "zstd", "snappy", "none":
		default:
			return bad("sink.parquet.compression", fmt.Sprintf("%q is not one of zstd, snappy, none, the compressions of the Parquet files syncd loads into BigQuery: leave it out for zstd", c.Sink.Parquet.Compression))
		}
	default:
		return bad("sink.type", fmt.Sprintf("%q is not a sink: use parquet or bigquery", c.Sink.Type))
	}
	if c.State.URL != "" {
		if u, err := url.Parse(c.State.URL); err != nil || (u.Scheme != "gs" && u.Scheme != "s3" && u.Scheme != "azblob") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return bad("state.url", fmt.Sprintf("%q is not a gs://, s3:// or azblob://bucket/prefix/object URL: those stores give the compare-and-swap the state needs; leave state.url out to use the local file state.path", c.State.URL))
		}
		if c.State.LeaseTTL < Duration(time.Second) {
			return bad("state.lease_ttl", "must be at least 1s (30s suits GCS, which takes about one write a second per object): the lease is renewed every third of it")
		}
	} else if c.State.Shared {
		return bad("state.shared", "needs state.url: processes share the state in a bucket (gs://, s3:// or azblob://), never a local file")
	} else if c.State.Path == "" {
		return bad("state.path", "is empty: set the file that keeps checkpoints, e.g. ./state/syncd.db")
	}
	if err := c.Scheduling.validate(bad); err != nil {
		return err
	}
	usesFormsOAuth := false
	for _, a := range c.Accounts {
		usesFormsOAuth = usesFormsOAuth || a.FormsOAuth
	}
	if err := c.FormsOAuth.validate(usesFormsOAuth, bad); err != nil {
		return err
	}
	if c.Server.PublicURL != "" && !isHTTPURL(c.Server.PublicURL) {
		return bad("server.public_url", fmt.Sprintf("%q is not an http(s) URL: set where browsers reach this syncd, e.g. https://syncd.example.com", c.Server.PublicURL))
	}
	if w := c.Sync.Webhooks; w.PublicURL != "" {
		if !isHTTPURL(w.PublicURL) {
			return bad("sync.webhooks.public_url", fmt.Sprintf("%q is not an http(s) URL: set where the Forms and scheduling services reach this syncd's server, e.g. https://syncd.example.com", w.PublicURL))
		}
		if len(w.Secret) < 16 {
			return bad("sync.webhooks.secret", "must be set, at least 16 characters, with sync.webhooks.public_url: it derives the webhooks' path tokens and signing secrets; use a long random value (openssl rand -hex 32), kept in the environment")
		}
	}
	if c.Sync.Webhooks.MaxBody < 1024 {
		return bad("sync.webhooks.max_body", fmt.Sprintf("%d bytes cannot hold a delivery: use at least 1024 (default 1048576)", c.Sync.Webhooks.MaxBody))
	}
	if c.Sync.Webhooks.Debounce < 0 || c.Sync.Webhooks.Debounce.D() > time.Minute {
		return bad("sync.webhooks.debounce", "must be between 0s and 1m")
	}
	if c.Server.ConnectSecret != "" {
		if len(c.Server.ConnectSecret) < 16 {
			return bad("server.connect_secret", "is shorter than 16 characters: use a long random value (openssl rand -hex 32), kept in the environment")
		}
		if c.Server.PublicURL == "" || c.Scheduling == nil {
			return bad("server.connect_secret", "needs server.public_url and a scheduling section: the connect page signs users in to the scheduling API and the API redirects them back to public_url")
		}
	}
	switch c.Log.Format {
	case "auto", "json", "console":
	default:
		return bad("log.format", fmt.Sprintf("%q is not one of auto, json, console", c.Log.Format))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level", fmt.Sprintf("%q is not one of debug, info, warn, error", c.Log.Level))
	}
	return nil
}

// positiveFinite reports whether v is above 0 and finite: YAML reads .nan
// and .inf as floats, and NaN passes every comparison check (NaN <= 0 is
// false), to fail later, far from its key.
func positiveFinite(v float64) bool { return v > 0 && !math.IsInf(v, 1) }

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkSchedule(spec string) error {
	if _, err := cron.ParseStandard(spec); err != nil {
		return fmt.Errorf("%q is not a cron schedule (%v): use five fields like \"*/15 * * * *\" or a descriptor like \"@hourly\" or \"@every 5m\"", spec, err)
	}
	return nil
}

// Secret is a string that never prints itself.
type Secret string

// String redacts the secret for %v and %s.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts the secret for %#v.
func (s Secret) GoString() string { return `"[redacted]"` }

// MarshalYAML redacts the secret when a config is printed: *** when set.
func (s Secret) MarshalYAML() (any, error) {
	if s == "" {
		return "", nil
	}
	return "***", nil
}

// Reveal returns the secret for the one place that must send it.
func (s Secret) Reveal() string { return string(s) }

// Duration is a time.Duration written as "90s", "2m", "1h30m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string, or a whole number of days
// ("30d").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if days, ok := strings.CutSuffix(n.Value, "d"); ok {
		if v, err := strconv.Atoi(days); err == nil && v >= 0 {
			*d = Duration(time.Duration(v) * 24 * time.Hour)
			return nil
		}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration: write it like 90s, 2m, 1h30m or 30d", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML prints the duration as the config takes it: whole days as
// "30d", otherwise in Go syntax without zero units ("1h30m", "90s").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String is the duration as MarshalYAML prints it.
func (d Duration) String() string {
	v := time.Duration(d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	s := v.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Date is a UTC instant given as a date ("2024-01-31") or an RFC 3339 time.
type Date struct{ time.Time }

// UnmarshalYAML accepts a date or an RFC 3339 timestamp.
func (d *Date) UnmarshalYAML(n *yaml.Node) error {
	t, err := ParseDate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	d.Time = t
	return nil
}

// MarshalYAML prints the date in RFC 3339.
func (d Date) MarshalYAML() (any, error) {
	if d.IsZero() {
		return "", nil
	}
	return d.Format(time.RFC3339), nil
}

// ParseDate accepts "2024-01-31" (UTC midnight) or any RFC 3339 timestamp.
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date: write it as 2024-01-31 or 2024-01-31T12:00:00Z", s)
}

// validate checks the scheduling section, when there is one.
func (s *Scheduling) validate(bad func(key, msg string) error) error {
	if s == nil {
		return nil
	}
	for _, u := range []struct{ key, v string }{{"scheduling.base_url", s.BaseURL}, {"scheduling.authorize_url", s.AuthorizeURL}} {
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return bad(u.key, fmt.Sprintf("%q is not an http(s) URL", u.v))
		}
	}
	if strings.TrimSpace(s.ClientID) == "" {
		return bad("scheduling.client_id", "is empty: set the OAuth client's id (e.g. ${SCHEDULING_CLIENT_ID})")
	}
	if s.ClientSecretNext != "" && s.ClientSecret == "" {
		return bad("scheduling.client_secret_next", "is set without client_secret: a public client has no secret to rotate")
	}
	if p, err := url.Parse(s.RedirectURI); err != nil || p.Scheme != "http" || !isLoopback(p.Hostname()) || p.Port() == "" {
		return bad("scheduling.redirect_uri", fmt.Sprintf("%q is not a loopback http URL with a port (e.g. http://127.0.0.1:8976/callback): `syncd auth login` listens there for the code", s.RedirectURI))
	}
	for i, sc := range s.Scopes {
		if !scopeName.MatchString(sc) {
			return bad(fmt.Sprintf("scheduling.scopes[%d]", i), fmt.Sprintf("%q is not a scope name like BOOKING_READ", sc))
		}
	}
	if !positiveFinite(s.RateLimit) {
		return bad("scheduling.rate_limit", fmt.Sprintf("must be a positive number of requests per second (default 2), not %v", s.RateLimit))
	}
	if s.MaxAttempts < 1 {
		return bad("scheduling.max_attempts", "must be at least 1")
	}
	if s.Timeout <= 0 {
		return bad("scheduling.timeout", "must be a positive duration, e.g. 60s")
	}
	if !tableName.MatchString(s.Bookings.Table) {
		return bad("scheduling.bookings.table", fmt.Sprintf("%q is not a valid table name: use letters, digits and _", s.Bookings.Table))
	}
	return nil
}

var scopeName = regexp.MustCompile(`^[A-Z][A-Z_]*$`)

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func isHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return s != "" && err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// accountName is what may name an account: it becomes a folder of the
// output, a prefix of BigQuery tables and of state keys.
var accountName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// validateAccounts checks the accounts list: with one, the top-level forms
// and source.api_key belong to an account instead.
func (c *Config) validateAccounts(bad func(key, msg string) error) error {
	if len(c.Accounts) == 0 {
		return nil
	}
	if len(c.Forms) > 0 {
		return bad("forms", "is set beside an accounts list: move it under the account it belongs to (accounts[i].forms)")
	}
	if c.lines["source.api_key"] > 0 {
		return bad("source.api_key", "is set beside an accounts list: give each account its own api_key or api_key_file (source keeps the defaults every account shares: base_url, rate_limit, timeout, max_attempts)")
	}
	seen := map[string]int{}
	folded := map[string]string{}
	for i, a := range c.Accounts {
		key := fmt.Sprintf("accounts[%d]", i)
		if !accountName.MatchString(a.Name) {
			return bad(key+".name", fmt.Sprintf("%q is not an account name: use 1 to 63 lowercase letters, digits, - and _, starting with a letter or digit (it names the account's output folder and state)", a.Name))
		}
		if a.Name == "scheduling" {
			return bad(key+".name", "scheduling is reserved (the default account's bookings stream is named scheduling/bookings): choose another name")
		}
		if j, ok := seen[a.Name]; ok {
			return bad(key+".name", fmt.Sprintf("account %s is listed twice (also accounts[%d])", a.Name, j))
		}
		seen[a.Name] = i
		f := strings.ReplaceAll(a.Name, "-", "_")
		if other, ok := folded[f]; ok {
			return bad(key+".name", fmt.Sprintf("accounts %s and %s would share BigQuery table names (- becomes _): rename one", other, a.Name))
		}
		folded[f] = a.Name
		if a.BaseURL != "" && !isHTTPURL(a.BaseURL) {
			return bad(key+".base_url", fmt.Sprintf("%q is not an http(s) URL: set the account's API base, e.g. https://eu-api.fillout.com/v1/api", a.BaseURL))
		}
		if a.APIKey != "" && a.APIKeyFile != "" {
			return bad(key+".api_key_file", "is set beside api_key: give one of them")
		}
		if a.FormsOAuth && (a.APIKey != "" || a.APIKeyFile != "") {
			given := "api_key"
			if a.APIKeyFile != "" {
				given = "api_key_file"
			}
			return bad(key+".forms_oauth", fmt.Sprintf("is set beside %s: account %s signs in to the Forms API with either a key or OAuth, so remove one of them", given, a.Name))
		}
		if a.FormsOAuth && c.FormsOAuth == nil {
			return bad(key+".forms_oauth", fmt.Sprintf("account %s signs in to the Forms API with OAuth, but the file has no forms_oauth section: add one with the OAuth app every account shares (client_id, client_secret), or give the account an api_key", a.Name))
		}
		if !a.HasForms() && (len(a.Forms) > 0 || len(a.Tags) > 0 || len(a.Exclude) > 0) {
			return bad(key+".api_key", fmt.Sprintf("account %s selects forms but has no Forms API key: set api_key (e.g. ${%s_FORMS_KEY}), api_key_file, or forms_oauth: true", a.Name, strings.ToUpper(f)))
		}
		if !a.HasForms() && !a.Scheduling {
			return bad(key, fmt.Sprintf("account %s syncs nothing: give it a Forms API key (api_key or api_key_file), forms_oauth: true, or scheduling: true", a.Name))
		}
		if a.Scheduling && c.Scheduling == nil {
			return bad(key+".scheduling", fmt.Sprintf("account %s signs in to the scheduling API, but the file has no scheduling section: add one with the OAuth client every account shares", a.Name))
		}
		if len(a.Forms) > 0 && len(a.Tags) > 0 {
			return bad(key+".tags", "is set beside forms: select forms by id or by tag, not both")
		}
		for j, t := range a.Tags {
			if strings.TrimSpace(t) == "" {
				return bad(fmt.Sprintf("%s.tags[%d]", key, j), "is empty")
			}
		}
		if err := validateForms(a.Forms, key+".forms", c.bookingsTable(a.Scheduling), bad); err != nil {
			return err
		}
	}
	return nil
}
