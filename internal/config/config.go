// Package config loads syncd's YAML configuration: ${ENV} expansion in values,
// strict keys (an unknown or misspelt key is an error naming it and its line),
// defaults, and validation with one clear sentence per problem.
package config

import (
	"time"
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

// Where is where the state lives, for messages: its URL, or its file.
func (s State) Where() string {
	if s.URL != "" {
		return s.URL
	}
	return s.Path
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
	c.Sink.Iceberg.setDefaults(c.State)
}
