package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
)

// OutputTable finds the table name stands for in the account's local
// Parquet output (`syncd rows`): a table's folder name, or a form id
// (its forms[].table, or its default name). It returns the output's
// folder and the table's name. Every error is the name's or the
// configuration's: an output in a bucket, no such table.
func OutputTable(cfg *config.Config, acct config.Account, name string) (root, table string, err error) {
	root = OutputOf(cfg, acct.Namespace())
	if blobstore.IsURL(root) {
		return "", "", fmt.Errorf("the output is in a bucket (%s): syncd rows reads a local folder; read the bucket with DuckDB", root)
	}
	tables := []string{name}
	for _, f := range append(slices.Clone(acct.Forms), cfg.Forms...) {
		if f.ID == name && f.Table != "" {
			tables = append(tables, f.Table)
		}
	}
	tables = append(tables, poller.DefaultTable(name))
	for _, t := range tables {
		if t == "" || strings.ContainsAny(t, `/\`) || strings.HasPrefix(t, ".") {
			continue
		}
		if st, err := os.Stat(filepath.Join(root, t)); err == nil && st.IsDir() {
			return root, t, nil
		}
	}
	return "", "", noTable(root, name)
}

// noTable says that name is no table of the output, and names those it has.
func noTable(root, name string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no output at %s yet: run `syncd once` first", root)
		}
		return fmt.Errorf("read the output %s: %w", root, err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(e.Name(), "_") {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s has no table yet: run `syncd once` first", root)
	}
	return fmt.Errorf("%s is neither a table under %s nor a form id of one; its tables: %s", name, root, strings.Join(names, ", "))
}
