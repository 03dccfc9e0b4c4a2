package app

import (
	"fmt"
	"io"
	"strings"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/status"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteForms writes the forms as `syncd forms` lists them for a person:
// the text form of its -o json.
func WriteForms(w io.Writer, forms []FormRow) error {
	rows := make([][]string, 0, len(forms))
	for _, f := range forms {
		rows = append(rows, []string{f.ID, f.Name, strings.Join(f.Tags, ","), f.Table})
	}
	return textfmt.Table(w, []string{"ID", "NAME", "TAGS", "TABLE"}, rows)
}

// WriteSchema writes the schema as `syncd schema` shows it for a person:
// the form and its table, how the files are partitioned (for a files
// output, cfg's), the questions not exported, then a line per column.
func WriteSchema(w io.Writer, s FormSchema, cfg *config.Config) error {
	rows := make([][]string, 0, len(s.Columns))
	for _, c := range s.Columns {
		src := c.Kind
		if c.SourceID != "" {
			src += " " + c.SourceID
		}
		if c.SourceType != "" {
			src += " (" + c.SourceType + ")"
		}
		rows = append(rows, []string{c.Name, c.Type, c.Mode, src, c.SourceName})
	}
	fmt.Fprintf(w, "form %s (%s) -> table %s: %s\n", s.ID, s.Name, s.Table, textfmt.Plural(int64(len(s.Columns)), "column"))
	if FilesOutput(cfg) {
		if s.Layout != "" {
			fmt.Fprintf(w, "files partitioned by %s\n", status.LayoutWords(s.Layout))
		} else {
			fmt.Fprintf(w, "files partitioned by: chosen by the table's first batch (sink.parquet.partition: %s)\n", cfg.Sink.Parquet.Partition)
		}
	}
	if len(s.NotExported) > 0 {
		fmt.Fprintf(w, "not exported (Password questions): %s\n", strings.Join(s.NotExported, ", "))
	}
	return textfmt.Table(w, []string{"COLUMN", "TYPE", "MODE", "SOURCE", "NAME"}, rows)
}
