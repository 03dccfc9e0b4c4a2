package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/sink/bigquery/bqrules"
)

// Sink chooses and configures the destination.
type Sink struct {
	Type     string        `yaml:"type"`
	Parquet  ParquetSink   `yaml:"parquet"`
	BigQuery *BigQuerySink `yaml:"bigquery,omitempty"`
	Iceberg  *IcebergSink  `yaml:"iceberg,omitempty"`
}

// IcebergSink writes Apache Iceberg tables: files in a warehouse, their
// pointers in a catalog (README, Iceberg).
type IcebergSink struct {
	// Warehouse is where the tables' files go: a local folder, or
	// gs://bucket/prefix, s3://bucket/prefix?region=…, azblob://container/prefix.
	Warehouse string         `yaml:"warehouse"`
	Catalog   IcebergCatalog `yaml:"catalog"`
	// Namespace holds the default account's tables; a named account's are
	// in <namespace>_<account>. Default: syncd.
	Namespace string `yaml:"namespace"`
	// TargetFileMB is the size data files are cut at and compacted to;
	// default 128.
	TargetFileMB int `yaml:"target_file_mb"`
	// CompactEvery is how often a stream's tables are maintained
	// (compacted, old snapshots expired, orphan files removed) after its
	// passes, when they have files to fold; default 1h. ExpireAfter and
	// KeepSnapshots bound the snapshots kept: older than expire_after
	// (default 168h) go, the last keep_snapshots (default 10) stay.
	CompactEvery  Duration `yaml:"compact_every"`
	ExpireAfter   Duration `yaml:"expire_after"`
	KeepSnapshots int      `yaml:"keep_snapshots"`
}

// IcebergCatalog is where the tables' pointers live. Secrets never go
// here: a PostgreSQL password comes from PGPASSWORD, a REST catalog's
// credential from SYNCD_ICEBERG_CREDENTIAL (client_id:client_secret) or
// its token from SYNCD_ICEBERG_TOKEN.
type IcebergCatalog struct {
	// Type is sqlite (the default: a file, no server), postgres (the JDBC
	// catalog's tables, as Spark, Trino and PyIceberg read them) or rest.
	Type string `yaml:"type"`
	// URI is the sqlite file (default: iceberg-catalog.db beside the
	// state file), postgres://user@host:5432/db, or the REST catalog's URL.
	URI string `yaml:"uri"`
	// Name is the catalog's name, as readers configure it; default syncd.
	Name string `yaml:"name"`
	// Scope is the OAuth2 scope a REST catalog's credential asks for
	// (Polaris: PRINCIPAL_ROLE:ALL).
	Scope string `yaml:"scope"`
	// Warehouse is the warehouse a REST catalog is asked for (Polaris,
	// Lakekeeper and Unity name a catalog here); default sink.iceberg.warehouse.
	Warehouse string `yaml:"warehouse"`
}

// setDefaults fills what a sink.iceberg section leaves out.
func (i *IcebergSink) setDefaults(state State) {
	if i == nil {
		return
	}
	if i.Catalog.Type == "" {
		i.Catalog.Type = "sqlite"
	}
	if i.Catalog.Type == "sqlite" && i.Catalog.URI == "" && state.URL == "" && state.Path != "" {
		i.Catalog.URI = filepath.Join(filepath.Dir(state.Path), "iceberg-catalog.db")
	}
	if i.Catalog.Name == "" {
		i.Catalog.Name = "syncd"
	}
	if i.Namespace == "" {
		i.Namespace = "syncd"
	}
	if i.TargetFileMB == 0 {
		i.TargetFileMB = 128
	}
	if i.CompactEvery == 0 {
		i.CompactEvery = Duration(time.Hour)
	}
	if i.ExpireAfter == 0 {
		i.ExpireAfter = Duration(7 * 24 * time.Hour)
	}
	if i.KeepSnapshots == 0 {
		i.KeepSnapshots = 10
	}
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

func validNamespace(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// isBucketScheme reports whether sink.parquet.path may have URL scheme s.
func isBucketScheme(s string) bool {
	switch s {
	case "gs", "s3", "azblob", "file":
		return true
	}
	return false
}

// validate checks the sink section: the chosen sink's settings.
func (s *Sink) validate(bad func(key, msg string) error) error {
	switch s.Type {
	case "parquet":
		if s.Parquet.Path == "" {
			return bad("sink.parquet.path", "is empty: set the folder (or bucket URL) to write Parquet files to")
		}
		if p := s.Parquet.Path; strings.Contains(p, "://") {
			if u, err := url.Parse(p); err != nil || !isBucketScheme(u.Scheme) || u.Host == "" && u.Scheme != "file" || u.Scheme == "file" && (u.Path == "" || u.Path == "/") {
				return bad("sink.parquet.path", fmt.Sprintf("%q is not a bucket URL: use gs://bucket/prefix, s3://bucket/prefix?region=..., azblob://container/prefix or file:///abs/path, or a local folder", p))
			}
		}
		switch s.Parquet.Compression {
		case "zstd", "snappy", "none":
		default:
			return bad("sink.parquet.compression", fmt.Sprintf("%q is not one of zstd, snappy, none", s.Parquet.Compression))
		}
		if s.Parquet.RowGroupRows < 1 {
			return bad("sink.parquet.row_group_rows", "must be at least 1")
		}
		switch s.Parquet.Partition {
		case "auto", "day", "month", "year", "none":
		default:
			return bad("sink.parquet.partition", fmt.Sprintf("%q is not one of auto (the default: each new table's density chooses), none, year, month, day", s.Parquet.Partition))
		}
	case "bigquery":
		bq := s.BigQuery
		if bq == nil || bq.Project == "" || bq.Dataset == "" {
			return bad("sink.bigquery", "needs project and dataset")
		}
		if msg := bqrules.DatasetIDProblem(bq.Dataset); msg != "" {
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
		if n := len(bq.Clustering); n > bqrules.MaxClustering {
			return bad("sink.bigquery.clustering", fmt.Sprintf("names %d columns, but BigQuery clusters a table on at most %d: keep the %d that queries filter on most", n, bqrules.MaxClustering, bqrules.MaxClustering))
		}
		// The loads are Parquet files of sink.parquet.compression.
		switch s.Parquet.Compression {
		case "zstd", "snappy", "none":
		default:
			return bad("sink.parquet.compression", fmt.Sprintf("%q is not one of zstd, snappy, none, the compressions of the Parquet files syncd loads into BigQuery: leave it out for zstd", s.Parquet.Compression))
		}
	case "iceberg":
		ic := s.Iceberg
		if ic == nil || ic.Warehouse == "" {
			return bad("sink.iceberg.warehouse", "is empty: set the folder (or bucket URL) the tables' files go to")
		}
		if p := ic.Warehouse; strings.Contains(p, "://") {
			if u, err := url.Parse(p); err != nil || !isBucketScheme(u.Scheme) || u.Host == "" && u.Scheme != "file" {
				return bad("sink.iceberg.warehouse", fmt.Sprintf("%q is not a bucket URL: use gs://bucket/prefix, s3://bucket/prefix?region=..., azblob://container/prefix, or a local folder", p))
			}
		}
		switch ic.Catalog.Type {
		case "sqlite":
			if ic.Catalog.URI == "" {
				return bad("sink.iceberg.catalog.uri", "is empty: the state is in a bucket, so there is no folder beside it for the sqlite catalog; set a file, or use a postgres or rest catalog")
			}
		case "postgres":
			if u, err := url.Parse(ic.Catalog.URI); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
				return bad("sink.iceberg.catalog.uri", "is not a postgres://user@host:5432/database URL (the password goes in PGPASSWORD, never here)")
			} else if _, has := u.User.Password(); has {
				return bad("sink.iceberg.catalog.uri", "holds a password: remove it and set PGPASSWORD in syncd's environment (a Secret), so that the config file carries none")
			}
		case "rest":
			if u, err := url.Parse(ic.Catalog.URI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return bad("sink.iceberg.catalog.uri", "is not the REST catalog's http(s) URL")
			}
		default:
			return bad("sink.iceberg.catalog.type", fmt.Sprintf("%q is not one of sqlite (the default), postgres, rest", ic.Catalog.Type))
		}
		if !validNamespace(ic.Namespace) {
			return bad("sink.iceberg.namespace", fmt.Sprintf("%q is not a namespace: use letters, digits and _", ic.Namespace))
		}
		if ic.TargetFileMB < 1 {
			return bad("sink.iceberg.target_file_mb", "must be at least 1")
		}
		if ic.CompactEvery < 0 || ic.ExpireAfter < 0 || ic.KeepSnapshots < 1 {
			return bad("sink.iceberg", "compact_every and expire_after cannot be negative, and keep_snapshots must be at least 1")
		}
	default:
		return bad("sink.type", fmt.Sprintf("%q is not a sink: use parquet, bigquery or iceberg", s.Type))
	}
	return nil
}
