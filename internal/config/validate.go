package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/syncd-dev/syncd/internal/table"
)

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
	if err := c.Sink.validate(bad); err != nil {
		return err
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
