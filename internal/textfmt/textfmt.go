// Package textfmt holds the little helpers the text renderings of syncd's
// views share (a pass's results, the state, the sign-ins, the tables the
// commands print), so that every package that owns a view writes its text
// the same way.
package textfmt

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// OrDash is s, or "-" when s is empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Plural is "1 row", "2 rows", "1 batch", "3 batches".
func Plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "ch") || strings.HasSuffix(noun, "s") {
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// Tabular prints aligned columns.
func Tabular(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}
