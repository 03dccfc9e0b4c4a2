package config

import (
	"fmt"

	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseValid(t *testing.T) {
	raw := `
source:
  base_url: http://127.0.0.1:8088/v1/api
  api_key: ${KEY}
  rate_limit: ${RATE:-7}
forms:
  - id: abc123
    table: signups
    start_date: 2024-01-31
sync:
  safety_lag: 90s
  max_rows_per_batch: ${ROWS}
sink:
  type: parquet
  parquet: {path: /tmp/out, compression: snappy}
`
	cfg, err := Parse("t.yaml", []byte(raw), env(map[string]string{"KEY": "sk_test_SECRET", "ROWS": "1000"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source.APIKey.Reveal() != "sk_test_SECRET" {
		t.Errorf("api key not expanded")
	}
	if cfg.Source.RateLimit != 7 {
		t.Errorf("rate_limit = %v, want the ${RATE:-7} default", cfg.Source.RateLimit)
	}
	if cfg.Sync.MaxRowsPerBatch != 1000 {
		t.Errorf("max_rows_per_batch = %d, want 1000 from the environment", cfg.Sync.MaxRowsPerBatch)
	}
	if cfg.Sync.SafetyLag.D() != 90*time.Second {
		t.Errorf("safety_lag = %v", cfg.Sync.SafetyLag.D())
	}
	if got := cfg.Forms[0].StartDate.Time; !got.Equal(time.Date(2024, 1, 31, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("start_date = %v", got)
	}
	if cfg.Sync.PageSize != 150 || cfg.State.Path != "./state/syncd.db" || cfg.Sink.Parquet.RowGroupRows != 65536 {
		t.Errorf("defaults not applied: %+v", cfg)
	}
}

func TestParseErrors(t *testing.T) {
	withKey := env(map[string]string{"FORMS_API_KEY": "sk_test_SECRET"})
	tests := []struct {
		name string
		raw  string
		env  func(string) (string, bool)
		want []string // every fragment must appear in the error
	}{
		{"unknown top-level key", "source:\n  base_url: http://x/v1\nsinks: {}\n", withKey, []string{"line 3", "sinks", "valid keys are"}},
		{"misspelt nested key", "sink:\n  type: parquet\n  parquet:\n    pth: ./out\n", withKey, []string{"line 4", "sink.parquet.pth", "path"}},
		{"unknown key in a form", "forms:\n  - id: a\n    tabel: x\n", withKey, []string{"line 3", "forms[0].tabel"}},
		{"missing api key", "", env(nil), []string{"FORMS_API_KEY is not set"}},
		{"missing env in value", "sync:\n  concurrency: ${NOPE}\n", withKey, []string{"line 2", "sync.concurrency", "NOPE is not set"}},
		{"bad duration", "sync:\n  safety_lag: soon\n", withKey, []string{"line 2", "sync.safety_lag", "not a duration"}},
		{"bad number", "sync:\n  concurrency: many\n", withKey, []string{"line 2", "sync.concurrency"}},
		{"negative concurrency", "sync:\n  concurrency: -3\n", withKey, []string{"sync.concurrency", "at least 1"}},
		{"zero rate limit", "source:\n  rate_limit: 0\n", withKey, []string{"source.rate_limit", "positive"}},
		{"negative safety lag", "sync:\n  safety_lag: -2m\n", withKey, []string{"sync.safety_lag", "negative"}},
		{"negative jitter", "sync:\n  jitter: -1s\n", withKey, []string{"sync.jitter", "negative"}},
		{"negative grace", "sync:\n  shutdown_grace: -1s\n", withKey, []string{"sync.shutdown_grace", "negative"}},
		{"zero timeout", "source:\n  timeout: 0s\n", withKey, []string{"source.timeout", "positive"}},
		{"zero batch", "sync:\n  max_rows_per_batch: 0\n", withKey, []string{"sync.max_rows_per_batch"}},
		{"negative unready", "server:\n  unready_after: -1s\n", withKey, []string{"server.unready_after", "negative"}},
		{"duration in a form list", "forms:\n  - id: a\n    start_date: soon\n", withKey, []string{"line 3", "forms[0].start_date"}},
		{"bad schedule", "sync:\n  schedule: every day\n", withKey, []string{"sync.schedule", "not a cron schedule"}},
		{"webhooks without a secret", "sync:\n  webhooks:\n    public_url: https://syncd.example.com\n", withKey, []string{"sync.webhooks.secret", "at least 16 characters"}},
		{"webhooks with a short secret", "sync:\n  webhooks:\n    public_url: https://syncd.example.com\n    secret: short\n", withKey, []string{"sync.webhooks.secret", "openssl rand"}},
		{"webhooks public_url not a URL", "sync:\n  webhooks:\n    public_url: syncd.example.com\n    secret: 0123456789abcdef0123\n", withKey, []string{"sync.webhooks.public_url", "not an http(s) URL"}},
		{"webhooks secret env unset", "sync:\n  webhooks:\n    secret: ${NOPE}\n", withKey, []string{"sync.webhooks.secret", "NOPE is not set"}},
		{"webhooks tiny body limit", "sync:\n  webhooks:\n    max_body: 10\n", withKey, []string{"sync.webhooks.max_body", "at least 1024"}},
		{"webhooks debounce too long", "sync:\n  webhooks:\n    debounce: 5m\n", withKey, []string{"sync.webhooks.debounce", "between 0s and 1m"}},
		{"bad sink type", "sink:\n  type: csv\n", withKey, []string{"sink.type", "parquet, bigquery or iceberg"}},
		{"iceberg without warehouse", "sink:\n  type: iceberg\n", withKey, []string{"sink.iceberg.warehouse", "is empty"}},
		{"iceberg bad catalog", "sink:\n  type: iceberg\n  iceberg:\n    warehouse: ./lake\n    catalog:\n      type: glue\n", withKey, []string{"sink.iceberg.catalog.type", "sqlite (the default), postgres, rest"}},
		{"iceberg password in uri", "sink:\n  type: iceberg\n  iceberg:\n    warehouse: ./lake\n    catalog:\n      type: postgres\n      uri: postgres://u:hunter2@db/lake\n", withKey, []string{"sink.iceberg.catalog.uri", "PGPASSWORD"}},
		{"iceberg rest not http", "sink:\n  type: iceberg\n  iceberg:\n    warehouse: s3://b/lake\n    catalog:\n      type: rest\n      uri: polaris\n", withKey, []string{"sink.iceberg.catalog.uri", "http(s) URL"}},
		{"bad base url", "source:\n  base_url: api.example.com\n", withKey, []string{"source.base_url"}},
		{"page size over the API limit", "sync:\n  page_size: 500\n", withKey, []string{"sync.page_size", "150"}},
		{"duplicate form", "forms:\n  - id: a\n  - id: a\n", withKey, []string{"forms[1].id", "twice"}},
		{"bad table name", "forms:\n  - id: a\n    table: my-table\n", withKey, []string{"forms[0].table"}},
		{"bad date", "sync:\n  start_date: yesterday\n", withKey, []string{"line 2", "not a date"}},
		{"not yaml", "source: [unclosed\n", withKey, []string{"config t.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(tt.raw), tt.env)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sk_test_SECRET") {
				t.Errorf("error leaks the API key: %q", err)
			}
		})
	}
}

func TestSecretNeverPrints(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte("source:\n  api_key: sk_test_SECRET\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		cfg.Source.APIKey.String(),
		strings.TrimSpace(fmtAll(cfg)),
	} {
		if strings.Contains(s, "sk_test_SECRET") {
			t.Errorf("secret printed: %s", s)
		}
	}
}

func TestLoadFileAndExample(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), env(nil)); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v", err)
	}
	// The commented example in configs/ must stay loadable.
	cfg, err := Load("../../configs/syncd.example.yaml", env(map[string]string{"FORMS_API_KEY": "k"}))
	if err != nil {
		t.Fatalf("configs/syncd.example.yaml: %v", err)
	}
	if cfg.Sink.Type != "parquet" {
		t.Errorf("example sink = %q", cfg.Sink.Type)
	}
	if _, err := Load("../../configs/demo.yaml", env(map[string]string{"FORMS_API_KEY": "k"})); err != nil {
		t.Fatalf("configs/demo.yaml: %v", err)
	}
	// make demo's Iceberg step: a state of its own (never the Parquet
	// demo's), the embedded sqlite catalog beside it, a local warehouse.
	demo, err := Load("../../configs/demo.yaml", env(map[string]string{"FORMS_API_KEY": "k"}))
	if err != nil {
		t.Fatal(err)
	}
	ice, err := Load("../../configs/demo-iceberg.yaml", env(map[string]string{"FORMS_API_KEY": "k"}))
	if err != nil {
		t.Fatalf("configs/demo-iceberg.yaml: %v", err)
	}
	if ic := ice.Sink.Iceberg; ice.Sink.Type != "iceberg" || ic == nil || ic.Catalog.Type != "sqlite" || strings.Contains(ic.Warehouse, "://") {
		t.Errorf("configs/demo-iceberg.yaml: sink %+v, want iceberg with the sqlite catalog and a local warehouse", ice.Sink)
	} else if ic.Catalog.URI != filepath.Join(filepath.Dir(ice.State.Path), "iceberg-catalog.db") {
		t.Errorf("configs/demo-iceberg.yaml: catalog %s, want iceberg-catalog.db beside the state %s", ic.Catalog.URI, ice.State.Path)
	}
	if ice.State.Path == demo.State.Path || ice.State.URL != "" {
		t.Errorf("configs/demo-iceberg.yaml: state %s shared with configs/demo.yaml: the tables would start from the Parquet output's checkpoints", ice.State.Path)
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"", "source:\n  api_key: x\n", "forms:\n  - id: a\n", "sync: {concurrency: -1}\n",
		"sink:\n  parquet:\n    path: ${X:-/tmp}\n", "a: [", "source: 5\n", "forms: {a: 1}\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		cfg, err := Parse("fuzz.yaml", raw, env(map[string]string{"FORMS_API_KEY": "sk_fuzz_SECRET"}))
		if err != nil {
			if strings.Contains(err.Error(), "sk_fuzz_SECRET") {
				t.Fatalf("error leaks the key: %v", err)
			}
			return
		}
		if cfg.Sync.PageSize < 1 || cfg.Sync.PageSize > 150 {
			t.Fatalf("accepted page_size %d", cfg.Sync.PageSize)
		}
	})
}

func fmtAll(cfg *Config) string {
	b, _ := yaml.Marshal(cfg)
	return string(b) + " " + fmt.Sprintf("%v %+v %#v", cfg.Source, cfg.Source, cfg.Source)
}

// Relative paths of a config file are relative to its folder, whatever the
// working directory: two runs of one config from two folders share one
// state (issue: two states, one output, every row written twice).
func TestLoadResolvesPathsAgainstTheConfigFolder(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, yaml                    string
		wantState, wantOut, wantSpool string
	}{
		{"relative keys", "sink: {type: parquet, parquet: {path: ./out}}\nstate: {path: st/syncd.db}\nsync: {spool_dir: ../spool}\n",
			filepath.Join(dir, "st/syncd.db"), filepath.Join(dir, "out"), filepath.Join(filepath.Dir(dir), "spool")},
		{"defaults", "sink: {type: parquet}\n",
			filepath.Join(dir, "state/syncd.db"), filepath.Join(dir, "out"), ""},
		{"absolute and URLs kept", "sink: {type: parquet, parquet: {path: s3://bucket/prefix}}\nstate: {path: /var/lib/syncd/syncd.db}\n",
			"/var/lib/syncd/syncd.db", "s3://bucket/prefix", ""},
	}
	// The Iceberg sink's local warehouse and sqlite catalog too (the demo's
	// configs/demo-iceberg.yaml: warehouse ../lake).
	icebergCases := []struct {
		name, yaml                 string
		wantWarehouse, wantCatalog string
	}{
		{"iceberg relative", "sink: {type: iceberg, iceberg: {warehouse: ../lake}}\nstate: {path: st/syncd.db}\n",
			filepath.Join(filepath.Dir(dir), "lake"), filepath.Join(dir, "st/iceberg-catalog.db")},
		{"iceberg catalog file", "sink: {type: iceberg, iceberg: {warehouse: ./lake, catalog: {uri: cat/c.db}}}\n",
			filepath.Join(dir, "lake"), filepath.Join(dir, "cat/c.db")},
		{"iceberg bucket kept", "sink: {type: iceberg, iceberg: {warehouse: gs://b/lake, catalog: {type: rest, uri: https://cat.example.com/api}}}\n",
			"gs://b/lake", "https://cat.example.com/api"},
	}
	for _, tc := range icebergCases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "syncd.yaml")
			if err := os.WriteFile(p, []byte("source: {api_key: k}\n"+tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Chdir(filepath.Dir(dir))
			cfg, err := Load(filepath.Join(filepath.Base(dir), "syncd.yaml"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if ic := cfg.Sink.Iceberg; ic.Warehouse != tc.wantWarehouse || ic.Catalog.URI != tc.wantCatalog {
				t.Errorf("warehouse %q, catalog %q; want %q, %q", ic.Warehouse, ic.Catalog.URI, tc.wantWarehouse, tc.wantCatalog)
			}
		})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "syncd.yaml")
			if err := os.WriteFile(p, []byte("source: {api_key: k}\n"+tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			// A relative config path, from another working directory.
			t.Chdir(filepath.Dir(dir))
			cfg, err := Load(filepath.Join(filepath.Base(dir), "syncd.yaml"), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.State.Path != tc.wantState || cfg.Sink.Parquet.Path != tc.wantOut || cfg.Sync.SpoolDir != tc.wantSpool {
				t.Errorf("state %q, out %q, spool %q; want %q, %q, %q", cfg.State.Path, cfg.Sink.Parquet.Path, cfg.Sync.SpoolDir, tc.wantState, tc.wantOut, tc.wantSpool)
			}
		})
	}
}
