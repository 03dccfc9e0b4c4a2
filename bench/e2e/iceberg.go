package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/syncd-dev/syncd/internal/sink/icebergsink"
)

// icebergTable is a table of `syncd tables -o json`.
type icebergTable struct {
	Account          string `json:"account"`
	Table            string `json:"table"`
	Snapshots        int    `json:"snapshots"`
	DataFiles        int64  `json:"data_files"`
	DeleteFiles      int64  `json:"delete_files"`
	Rows             int64  `json:"rows"`
	Bytes            int64  `json:"bytes"`
	Partitioning     string `json:"partitioning"`
	MetadataLocation string `json:"metadata_location"`
}

// syncdJSON runs `syncd args... -o json --config cfg` and decodes its
// standard output into v.
func syncdJSON(ctx context.Context, bin, cfg string, env []string, v any, args ...string) {
	cmd := exec.CommandContext(ctx, bin, append(args, "-o", "json", "--config", cfg)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		fatalf("syncd %s: %v\n%s", args[0], err, tail(stderr.String()))
	}
	if err := json.Unmarshal(out, v); err != nil {
		fatalf("syncd %s -o json: %v\n%s", args[0], err, tail(string(out)))
	}
}

// icebergTables is `syncd tables -o json`.
func icebergTables(ctx context.Context, bin, cfg string, env []string) []icebergTable {
	var list []icebergTable
	syncdJSON(ctx, bin, cfg, env, &list, "tables")
	return list
}

// icebergDataFiles lists the local paths and sizes of the data files of
// table's current snapshot (namespace syncd), read by iceberg-go through
// the embedded sqlite catalog of the run in dir (syncd is not running).
func icebergDataFiles(ctx context.Context, dir, table string) (paths []string, bytes int64) {
	cat, err := icebergsink.OpenCatalog(ctx, icebergsink.CatalogConfig{Type: icebergsink.CatalogSQLite,
		URI: filepath.Join(dir, "state", "iceberg-catalog.db"), Warehouse: outDir(dir)})
	if err != nil {
		fatalf("iceberg catalog: %v", err)
	}
	defer cat.Close()
	t, err := cat.LoadTable(ctx, []string{"syncd", table})
	if err != nil {
		fatalf("iceberg: load %s: %v", table, err)
	}
	tasks, err := t.Scan().PlanFiles(ctx)
	if err != nil {
		fatalf("iceberg: plan %s: %v", table, err)
	}
	for _, tk := range tasks {
		if len(tk.DeleteFiles) > 0 || len(tk.EqualityDeleteFiles) > 0 {
			fatalf("iceberg: %s: a data file with delete files (a versions table has none)", table)
		}
		p := tk.File.FilePath()
		if !strings.HasPrefix(p, "file://") && !strings.HasPrefix(p, "/") {
			fatalf("iceberg: %s: %s is not a local file", table, p)
		}
		paths = append(paths, strings.TrimPrefix(p, "file://"))
		bytes += tk.File.FileSizeBytes()
	}
	return paths, bytes
}
