package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/sink"
	"github.com/syncd-dev/syncd/internal/sink/bigquery"
	"github.com/syncd-dev/syncd/internal/sink/blobsink"
	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
	"github.com/syncd-dev/syncd/internal/sink/parquetsink"
)

// This file is the one place that maps sink.type to a sink: a new sink is
// one entry in sinkKinds (and its package). Everything else asks the
// configured kind what it is (FilesOutput) or the opened sink for its
// capabilities.

// sinkKind is one value of sink.type: how its sink opens and how its
// output is named in messages.
type sinkKind struct {
	name string
	// files: the sink writes Parquet files, one per partition (a
	// sink.Partitioner), in a folder or bucket.
	files bool
	// open opens the share of the output of the account of namespace;
	// probing: only to be probed, leaving a running daemon's temporary
	// files alone.
	open func(ctx context.Context, cfg *config.Config, namespace, version string, log *zap.Logger, mem memory.Allocator, probing bool) (sink.Sink, error)
	// where names the output, and an account's share of it, for
	// messages; short names the output in validate's lines.
	where func(cfg *config.Config, namespace string) string
	short func(cfg *config.Config) string
}

// sinkKinds is the explicit list of sinks (no init() registry).
func sinkKinds() []sinkKind {
	return []sinkKind{
		{name: "parquet", files: true, open: openParquet, where: parquetWhere, short: parquetWhere0},
		{name: "bigquery", open: openBigQuery, where: bigQueryWhere, short: bigQueryDataset},
		{name: "iceberg", open: openIceberg, where: icebergWhere, short: icebergWhere0},
	}
}

// kindOf is the configured sink's kind.
func kindOf(cfg *config.Config) (sinkKind, error) {
	names := make([]string, 0, 2)
	for _, k := range sinkKinds() {
		if k.name == cfg.Sink.Type {
			return k, nil
		}
		names = append(names, k.name)
	}
	return sinkKind{}, fmt.Errorf("sink type %q is not one of %s", cfg.Sink.Type, strings.Join(names, ", "))
}

// FilesOutput reports whether the configured sink writes Parquet files
// (one per partition, windows cut at partition starts) that syncd can read
// back itself, rather than loading a warehouse.
func FilesOutput(cfg *config.Config) bool {
	k, err := kindOf(cfg)
	return err == nil && k.files
}

// NewAccountSink opens the share of the output of the account of
// namespace: the output itself for the default account, its account=
// folder or its table prefix for another.
//
// mem is the memory of the Parquet writer's buffers (nil: Go's).
func NewAccountSink(cfg *config.Config, namespace, version string, log *zap.Logger, mem memory.Allocator) (sink.Sink, error) {
	k, err := kindOf(cfg)
	if err != nil {
		return nil, err
	}
	return k.open(context.Background(), cfg, namespace, version, log, mem, false)
}

// ProbeOutput proves the configured output can be written, by its sink's
// probe (sink.Prober), without cleaning up anything a running daemon
// writes. msg says what was checked; warn is something to fix that does
// not stop a sync.
func ProbeOutput(ctx context.Context, cfg *config.Config, log *zap.Logger) (msg, warn string, err error) {
	k, err := kindOf(cfg)
	if err != nil {
		return "", "", err
	}
	s, err := k.open(ctx, cfg, "", "", log, nil, true)
	if err != nil {
		return "", "", err
	}
	defer s.Close()
	msg = k.name + " " + k.short(cfg)
	p, ok := s.(sink.Prober)
	if !ok {
		return msg, "", nil
	}
	found, err := p.Probe(ctx)
	if err != nil {
		return "", "", err
	}
	if found.Checked != "" {
		msg += " (" + found.Checked + ")"
	}
	return msg, found.Warning, nil
}

func openParquet(ctx context.Context, cfg *config.Config, namespace, version string, log *zap.Logger, mem memory.Allocator, probing bool) (sink.Sink, error) {
	enc := parquetsink.EncodeOptions{
		Compression:  parquetsink.Compression(cfg.Sink.Parquet.Compression),
		RowGroupRows: cfg.Sink.Parquet.RowGroupRows,
		Allocator:    mem,
	}
	path := parquetWhere(cfg, namespace)
	if blobstore.IsURL(path) {
		s, err := blobsink.New(ctx, blobsink.Options{
			URL: path, Version: version, Logger: log.Named("sink"), Encode: enc,
			Layout: sinkDefaultLayout(cfg),
		})
		if err != nil {
			return nil, fmt.Errorf("open the parquet sink: %w", err)
		}
		return s, nil
	}
	s, err := parquetsink.New(parquetsink.Options{
		Root: path, Version: version, Logger: log.Named("sink"), Encode: enc,
		Layout: sinkDefaultLayout(cfg), KeepTemp: probing,
	})
	if err != nil && probing {
		// validate names the folder and the fix, as its probe of a folder
		// it could open does (parquetsink's Probe).
		cause := err
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			cause = pe.Err
		}
		return nil, fmt.Errorf("output folder %s cannot be created (%v): make it writable for the user syncd runs as, or set sink.parquet.path to a folder it can write", path, cause)
	}
	if err != nil {
		return nil, fmt.Errorf("open the parquet sink: %w", err)
	}
	return s, nil
}

func openBigQuery(ctx context.Context, cfg *config.Config, namespace, version string, log *zap.Logger, mem memory.Allocator, _ bool) (sink.Sink, error) {
	bq := cfg.Sink.BigQuery
	prefix := bq.TablePrefix
	if namespace != "" {
		prefix += AccountTablePrefix(namespace)
	}
	s, err := bigquery.New(ctx, bigquery.Options{
		Project: bq.Project, Dataset: bq.Dataset, Location: bq.Location, TablePrefix: prefix,
		Clustering: bq.Clustering, Logger: log.Named("sink"), Version: version,
		Encode:        parquetsink.EncodeOptions{Compression: parquetsink.Compression(cfg.Sink.Parquet.Compression), Allocator: mem},
		ClientOptions: bigquery.EndpointOptions(bq.Endpoint),
		MaxAttempts:   bq.MaxAttempts,
		MinBackoff:    bq.MinBackoff.D(),
		MaxBackoff:    bq.MaxBackoff.D(),
		TempDir:       cfg.Sync.SpoolDir,
	})
	if err != nil {
		return nil, fmt.Errorf("open the bigquery sink: %w", err)
	}
	return s, nil
}

func openIceberg(ctx context.Context, cfg *config.Config, namespace, version string, log *zap.Logger, _ memory.Allocator, _ bool) (sink.Sink, error) {
	ic := cfg.Sink.Iceberg
	if ic == nil {
		return nil, errors.New("open the iceberg sink: the config has no sink.iceberg section")
	}
	cat, err := icebergsink.OpenCatalog(ctx, IcebergCatalogConfig(cfg))
	if err != nil {
		return nil, err
	}
	s, err := icebergsink.New(icebergsink.Options{
		Catalog: cat, CloseCatalog: true, Namespace: IcebergNamespace(cfg, namespace),
		TargetFileSize: int64(ic.TargetFileMB) << 20, PartitionTarget: cfg.Sync.MaxRowsPerBatch,
		MaintainEvery: ic.CompactEvery.D(), ExpireAfter: ic.ExpireAfter.D(), KeepSnapshots: ic.KeepSnapshots,
		Version: version, Logger: log.Named("sink"),
	})
	if err != nil {
		cat.Close()
		return nil, err
	}
	return s, nil
}

// IcebergCatalogConfig is the configured Iceberg catalog, with its
// secrets from the environment (never from the config file).
func IcebergCatalogConfig(cfg *config.Config) icebergsink.CatalogConfig {
	ic := cfg.Sink.Iceberg
	props := map[string]string{}
	if c := os.Getenv("SYNCD_ICEBERG_CREDENTIAL"); c != "" {
		props["credential"] = c
	}
	if tok := os.Getenv("SYNCD_ICEBERG_TOKEN"); tok != "" {
		props["token"] = tok
	}
	if ic.Catalog.Scope != "" {
		props["scope"] = ic.Catalog.Scope
	}
	if ic.Catalog.Warehouse != "" {
		props["warehouse"] = ic.Catalog.Warehouse
	}
	return icebergsink.CatalogConfig{Type: ic.Catalog.Type, URI: ic.Catalog.URI, Warehouse: ic.Warehouse, Name: ic.Catalog.Name, Props: props}
}

// IcebergNamespace is the namespace of the tables of the account of
// namespace: the configured one for the default account, with the
// account's name after it for another (one level: every engine reads
// one-level namespaces; a table prefix would mix accounts in one list).
func IcebergNamespace(cfg *config.Config, namespace string) string {
	ns := cfg.Sink.Iceberg.Namespace
	if namespace == "" {
		return ns
	}
	return ns + "_" + strings.ReplaceAll(namespace, "-", "_")
}

func icebergWhere(cfg *config.Config, namespace string) string {
	ic := cfg.Sink.Iceberg
	if ic == nil {
		return "Iceberg"
	}
	return "Iceberg namespace " + IcebergNamespace(cfg, namespace) + " (catalog " + ic.Catalog.Type + ", warehouse " + ic.Warehouse + ")"
}

func icebergWhere0(cfg *config.Config) string { return icebergWhere(cfg, "") }

func parquetWhere(cfg *config.Config, namespace string) string {
	if namespace == "" {
		return cfg.Sink.Parquet.Path
	}
	return joinOutput(cfg.Sink.Parquet.Path, AccountFolder(namespace))
}

func parquetWhere0(cfg *config.Config) string { return parquetWhere(cfg, "") }

func bigQueryWhere(cfg *config.Config, namespace string) string {
	bq := cfg.Sink.BigQuery
	if bq == nil {
		return cfg.Sink.Parquet.Path // unreachable: config validation wants the section
	}
	where := "BigQuery dataset " + bigQueryDataset(cfg)
	if namespace == "" {
		return where
	}
	return where + " (tables " + bq.TablePrefix + AccountTablePrefix(namespace) + "*)"
}

func bigQueryDataset(cfg *config.Config) string {
	if bq := cfg.Sink.BigQuery; bq != nil {
		return bq.Project + "." + bq.Dataset
	}
	return ""
}

// AccountFolder is the folder of a named account's tables in a Parquet
// output: a Hive partition key, so that one query reads every account's
// table of one name with an account column (read_parquet('out/account=*/
// bookings/**/*.parquet', hive_partitioning = true)), and never a table
// name (those have no "=").
func AccountFolder(namespace string) string { return "account=" + namespace }

// AccountTablePrefix is what starts a named account's BigQuery table
// names in the configured dataset.
func AccountTablePrefix(namespace string) string {
	return strings.ReplaceAll(namespace, "-", "_") + "__"
}

// OutputOf is where an account's output lives, for messages.
func OutputOf(cfg *config.Config, namespace string) string {
	k, err := kindOf(cfg)
	if err != nil {
		return cfg.Sink.Type
	}
	return k.where(cfg, namespace)
}

// OutputWhere is where the configured output lives, for messages.
func OutputWhere(cfg *config.Config) string { return OutputOf(cfg, "") }

// joinOutput appends a folder to a local path or a bucket URL (before its
// query, which carries options such as ?region=).
func joinOutput(base, folder string) string {
	if blobstore.IsURL(base) {
		u, q, _ := strings.Cut(base, "?")
		u = strings.TrimRight(u, "/") + "/" + folder
		if q != "" {
			u += "?" + q
		}
		return u
	}
	return filepath.Join(base, folder)
}

// sinkDefaultLayout is the layout the Parquet sink writes a batch that
// names none in (sink.Batch.Layout): the configured one, or day, the
// default of the versions before each table chose its own. Every batch
// the engine commits names its table's.
func sinkDefaultLayout(cfg *config.Config) parquetsink.Layout {
	if l := cfg.Sink.Parquet.Partition; l != "" && l != sink.LayoutAuto {
		return parquetsink.Layout(l)
	}
	return parquetsink.LayoutDay
}
