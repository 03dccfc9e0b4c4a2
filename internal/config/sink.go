package config

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/sink/bigquery/bqrules"
)

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
	default:
		return bad("sink.type", fmt.Sprintf("%q is not a sink: use parquet or bigquery", s.Type))
	}
	return nil
}
