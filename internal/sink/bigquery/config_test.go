package bigquery

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

func lookupKey(k string) (string, bool) { return "k", k == "FORMS_API_KEY" }

// TestFallbackDefaultsAreTheConfigs: the sink's fallback for a caller that
// leaves the retry settings 0 is the configuration's default, which
// `syncd config` shows.
func TestFallbackDefaultsAreTheConfigs(t *testing.T) {
	for _, extra := range []string{"", "    min_backoff: 1m\n", "    max_attempts: 2\n    max_backoff: 2s\n"} {
		raw := "sink:\n  type: bigquery\n  bigquery:\n    project: p\n    dataset: d\n" + extra
		cfg, err := config.Parse("t.yaml", []byte(raw), lookupKey)
		if err != nil {
			t.Fatal(err)
		}
		bq := cfg.Sink.BigQuery
		// What the sink does with the file's own values (0 when left out).
		var file config.BigQuerySink
		if err := yaml.Unmarshal([]byte(extra), &file); err != nil {
			t.Fatal(err)
		}
		o := Options{Project: "p", Dataset: "d", MaxAttempts: file.MaxAttempts, MinBackoff: file.MinBackoff.D(), MaxBackoff: file.MaxBackoff.D()}
		if err := o.setDefaults(); err != nil {
			t.Fatal(err)
		}
		if o.MaxAttempts != bq.MaxAttempts || o.MinBackoff != bq.MinBackoff.D() || o.MaxBackoff != bq.MaxBackoff.D() {
			t.Errorf("%q: the sink uses %d, %v, %v; the configuration shows %d, %v, %v",
				extra, o.MaxAttempts, o.MinBackoff, o.MaxBackoff, bq.MaxAttempts, bq.MinBackoff.D(), bq.MaxBackoff.D())
		}
	}
}

// TestConfigRefusesWhatTheSinkRefuses: every dataset, clustering and
// compression the sink refuses when it opens is refused by the
// configuration first (with its key and line), and what the configuration
// takes the sink takes.
func TestConfigRefusesWhatTheSinkRefuses(t *testing.T) {
	type values struct {
		dataset     string
		clustering  []string
		compression string
	}
	ok := values{"d", nil, "zstd"}
	cases := []values{ok}
	for _, d := range []string{"forms", "Forms_2024", "my-dataset", "p.forms", "données", strings.Repeat("d", 1024), strings.Repeat("d", 1025)} {
		v := ok
		v.dataset = d
		cases = append(cases, v)
	}
	for _, n := range []int{1, 4, 5} {
		v := ok
		for i := range n {
			v.clustering = append(v.clustering, fmt.Sprintf("c%d", i))
		}
		cases = append(cases, v)
	}
	for _, c := range []string{"snappy", "none", "lz4", "gzip", "ZSTD"} {
		v := ok
		v.compression = c
		cases = append(cases, v)
	}
	for _, v := range cases {
		raw := fmt.Sprintf("sink:\n  type: bigquery\n  parquet:\n    compression: %q\n  bigquery:\n    project: p\n    dataset: %q\n    clustering: [%s]\n",
			v.compression, v.dataset, strings.Join(v.clustering, ", "))
		_, cfgErr := config.Parse("t.yaml", []byte(raw), lookupKey)
		o := Options{Project: "p", Dataset: v.dataset, Clustering: v.clustering, Encode: parquetsink.EncodeOptions{Compression: parquetsink.Compression(v.compression)}}
		sinkErr := o.setDefaults()
		name := fmt.Sprintf("dataset %.20q, %d clustering columns, compression %q", v.dataset, len(v.clustering), v.compression)
		if (cfgErr == nil) != (sinkErr == nil) {
			t.Errorf("%s: the configuration says %v, the sink %v", name, cfgErr, sinkErr)
		}
	}
}
