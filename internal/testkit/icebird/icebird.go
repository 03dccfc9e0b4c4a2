// Package icebird reads Iceberg tables with icebird, a JavaScript reader
// (npm icebird, pinned in the Makefile, installed into bin/tools by `make
// tools`), so that tests check the tables syncd writes with iceberg-go
// against a reader that shares no code with the writer. It runs a small
// Node script (read.mjs) that reads the table through fetch; this package
// serves the table's files to it on loopback, from a local warehouse folder
// or from a bucket on a test server, whatever the table's location scheme.
//
// Where icebird 0.3.1 differs from the spec: it applies an equality delete
// to every older data file, whatever their partitions (the spec: the
// delete's partition only, unless the delete is unpartitioned), so on a
// partitioned table a key living in two partitions reads wrong
// (TestEqualityDeletesIgnorePartitions). It reads only the current
// snapshot of v1/v2 tables (no deletion vectors).
//
// It imports nothing of syncd but internal/testkit/procs.
package icebird

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/syncd-dev/syncd/internal/testkit/procs"
)

//go:embed read.mjs
var script []byte

// modulesRel is icebird's package under bin/tools, as `make tools` installs it.
const modulesRel = "node_modules/icebird/package.json"

// Source serves the files of table locations under one prefix: the reader
// fetches prefix + "/" + rest as rest from the source.
type Source struct {
	prefix  string
	handler http.Handler
}

// LocalDir serves locations under prefix (e.g. "file:///tmp/wh", a local
// warehouse) from the folder dir.
func LocalDir(prefix, dir string) Source {
	return Source{prefix: prefix, handler: http.FileServer(http.Dir(dir))}
}

// Bucket serves locations under prefix (e.g. "s3://acme-lake", no query)
// from b, as keys relative to prefix: for a prefix deeper than the bucket
// pass blob.PrefixedBucket.
func Bucket(prefix string, b *blob.Bucket) Source {
	return Source{prefix: prefix, handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := strings.TrimPrefix(r.URL.Path, "/")
		rd, err := b.NewReader(r.Context(), key, nil)
		if err != nil {
			code := http.StatusInternalServerError
			if gcerrors.Code(err) == gcerrors.NotFound {
				code = http.StatusNotFound
			}
			http.Error(w, err.Error(), code)
			return
		}
		defer rd.Close()
		// blob.Reader seeks (it reopens a range reader), so ServeContent
		// answers HEAD and Range requests as icebird makes them.
		http.ServeContent(w, r, key, rd.ModTime(), rd)
	})}
}

// Table is what icebird read: the current snapshot's rows and live files.
type Table struct {
	SnapshotID int64 // the current snapshot; 0 when the table has none
	Schema     []Field
	// Rows are the rows after deletes, in icebird's order (files in
	// manifest order), keyed by column name. Values by Iceberg type:
	// int and long are int64; boolean bool; float and double float64;
	// string string; timestamp(tz) time.Time in UTC, microsecond
	// precision; date time.Time (midnight UTC); time int64 microseconds;
	// binary and fixed []byte; decimal float64 (icebird's own rounding);
	// null nil. Other types (uuid, struct, list, map) come as decoded JSON.
	Rows        []map[string]any
	DataFiles   []File
	DeleteFiles []File // position and equality deletes
}

// Field is a column of the table's current schema.
type Field struct {
	ID       int
	Name     string
	Type     string // Iceberg's name: "long", "timestamptz", "decimal(9,2)"; "struct", "list", "map" for nested
	Required bool
}

// Content is what a file holds, as the manifest says.
type Content int

// The content types of the Iceberg spec.
const (
	Data            Content = 0
	PositionDeletes Content = 1
	EqualityDeletes Content = 2
)

// File is a live file of the current snapshot, from its manifest entry.
type File struct {
	Path           string // as the manifest has it (file://, s3://, ...)
	Content        Content
	Format         string // PARQUET
	RecordCount    int64
	SizeBytes      int64
	SequenceNumber int64
	Partition      map[string]any // partition field name -> value, decoded JSON (numbers json.Number, longs strings)
	EqualityIDs    []int          // equality deletes only
}

// Read reads the table whose metadata file is metadataLocation, serving its
// files from sources. It fails the test on any error, with the script's
// stderr, and names `make tools` when icebird is not installed.
func Read(t testing.TB, metadataLocation string, sources ...Source) *Table {
	t.Helper()
	procs.Tool(t, modulesRel)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tb, err := Load(ctx, metadataLocation, sources...)
	if err != nil {
		t.Fatalf("icebird: %v", err)
	}
	return tb
}

// Load is Read returning an error instead of failing a test (for a judge
// that runs outside a test's goroutine).
func Load(ctx context.Context, metadataLocation string, sources ...Source) (*Table, error) {
	if _, err := os.Stat(filepath.Join(procs.ToolsDir(), filepath.FromSlash(modulesRel))); err != nil {
		return nil, fmt.Errorf("icebird is not installed (%v): run `make tools` in %s", err, procs.RepoRoot())
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is missing (install Node.js 20 or later): %w", err)
	}
	dir, err := os.MkdirTemp("", "icebird-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	scriptPath := filepath.Join(dir, "read.mjs")
	if err := os.WriteFile(scriptPath, script, 0o644); err != nil {
		return nil, err
	}
	// Node resolves ES modules from the script's folder, not NODE_PATH: the
	// script imports icebird by path. Symlinks resolved (bin may be one) so
	// that the script's and icebird's imports of hyparquet are one module.
	modules, err := filepath.EvalSymlinks(filepath.Join(procs.ToolsDir(), "node_modules"))
	if err != nil {
		return nil, err
	}

	// One loopback server per read, each source under /<index>/.
	mux := http.NewServeMux()
	var mapping [][2]string
	for i, s := range sources {
		p := "/" + strconv.Itoa(i)
		mux.Handle(p+"/", http.StripPrefix(p, s.handler))
		mapping = append(mapping, [2]string{strings.TrimRight(s.prefix, "/"), ""})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for i := range mapping {
		mapping[i][1] = srv.URL + "/" + strconv.Itoa(i) + "/"
	}
	sourcesJSON, _ := json.Marshal(mapping)

	cmd := exec.CommandContext(ctx, node, scriptPath)
	cmd.Env = append(os.Environ(),
		"ICEBIRD_MODULES="+modules,
		"ICEBIRD_METADATA="+metadataLocation,
		"ICEBIRD_SOURCES="+string(sourcesJSON))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("read %s: %v\n%s", metadataLocation, err, stderr.String())
	}
	tb, err := decode(stdout.Bytes())
	if err != nil {
		return nil, fmt.Errorf("read %s: %v\nstderr: %s", metadataLocation, err, stderr.String())
	}
	return tb, nil
}

// output is the script's JSON.
type output struct {
	SnapshotID jsInt `json:"snapshotId"`
	Schema     []struct {
		ID       int             `json:"id"`
		Name     string          `json:"name"`
		Type     json.RawMessage `json:"type"`
		Required bool            `json:"required"`
	} `json:"schema"`
	Rows  []map[string]any `json:"rows"`
	Files []struct {
		Path           string         `json:"path"`
		Content        int            `json:"content"`
		Format         string         `json:"format"`
		RecordCount    jsInt          `json:"recordCount"`
		SizeBytes      jsInt          `json:"sizeBytes"`
		SequenceNumber jsInt          `json:"sequenceNumber"`
		Partition      map[string]any `json:"partition"`
		EqualityIDs    []int          `json:"equalityIds"`
	} `json:"files"`
}

// jsInt is a 64-bit integer the script prints as a string (a BigInt) or a
// number.
type jsInt int64

func (n *jsInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(strings.Trim(string(b), `"`), 10, 64)
	*n = jsInt(v)
	return err
}

func decode(raw []byte) (*Table, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out output
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("decode the script's output: %w", err)
	}
	tb := &Table{SnapshotID: max(int64(out.SnapshotID), 0), Rows: out.Rows}
	types := map[string]string{}
	for _, f := range out.Schema {
		typ := strings.Trim(string(f.Type), `"`)
		if strings.HasPrefix(typ, "{") {
			var nested struct{ Type string }
			_ = json.Unmarshal(f.Type, &nested)
			typ = nested.Type
		}
		tb.Schema = append(tb.Schema, Field{ID: f.ID, Name: f.Name, Type: typ, Required: f.Required})
		types[f.Name] = typ
	}
	for _, row := range tb.Rows {
		for col, v := range row {
			conv, err := convert(types[col], v)
			if err != nil {
				return nil, fmt.Errorf("column %s: %w", col, err)
			}
			row[col] = conv
		}
	}
	for _, f := range out.Files {
		file := File{Path: f.Path, Content: Content(f.Content), Format: f.Format, RecordCount: int64(f.RecordCount),
			SizeBytes: int64(f.SizeBytes), SequenceNumber: int64(f.SequenceNumber), Partition: f.Partition, EqualityIDs: f.EqualityIDs}
		if file.Content == Data {
			tb.DataFiles = append(tb.DataFiles, file)
		} else {
			tb.DeleteFiles = append(tb.DeleteFiles, file)
		}
	}
	return tb, nil
}

// convert turns a JSON value into the Go value of its Iceberg type (see
// Table.Rows).
func convert(typ string, v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	switch {
	case typ == "int" || typ == "long" || typ == "time":
		return strconv.ParseInt(strings.Trim(fmt.Sprint(v), `"`), 10, 64)
	case typ == "float" || typ == "double" || strings.HasPrefix(typ, "decimal"):
		switch s := fmt.Sprint(v); s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		default:
			return strconv.ParseFloat(s, 64)
		}
	case typ == "boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("boolean %v is a %T", v, v)
		}
		return b, nil
	case strings.HasPrefix(typ, "timestamp"):
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("timestamp %v is a %T", v, v)
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		return ts.UTC(), err
	case typ == "date":
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("date %v is a %T", v, v)
		}
		return time.Parse(time.DateOnly, s[:min(len(s), 10)])
	case typ == "binary" || strings.HasPrefix(typ, "fixed"):
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("binary %v is a %T", v, v)
		}
		return base64.StdEncoding.DecodeString(s)
	}
	return v, nil
}

// SortBy sorts Rows by the values of col (nil first) and returns tb.
func (tb *Table) SortBy(col string) *Table {
	slices.SortStableFunc(tb.Rows, func(a, b map[string]any) int { return compare(a[col], b[col]) })
	return tb
}

func compare(a, b any) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return cmp.Compare(x, y)
		}
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
	case time.Time:
		if y, ok := b.(time.Time); ok {
			return x.Compare(y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmp.Compare(strconv.FormatBool(x), strconv.FormatBool(y))
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

// ErrNotLocal is returned for a file that is not on the local filesystem.
var ErrNotLocal = errors.New("not a local file")

// LocalPath is the filesystem path of a file:// location (or an absolute
// path as is).
func LocalPath(location string) (string, error) {
	switch {
	case strings.HasPrefix(location, "file://"):
		return strings.TrimPrefix(location, "file://"), nil
	case strings.HasPrefix(location, "/"):
		return location, nil
	}
	return "", fmt.Errorf("%s: %w", location, ErrNotLocal)
}
