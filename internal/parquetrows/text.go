package parquetrows

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/syncd-dev/syncd/internal/textfmt"
)

// maxCell is the most runes a value takes in the table output; -o json
// prints values whole.
const maxCell = 40

// WriteText writes the rows as a table, for a person (the text form of
// the Table `syncd rows -o json` prints); CountText is the line after it.
func (t Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	upper := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		upper[i] = strings.ToUpper(c)
	}
	fmt.Fprintln(tw, strings.Join(upper, "\t"))
	for _, r := range t.Rows {
		cells := make([]string, len(t.Columns))
		for i, c := range t.Columns {
			cells[i] = cellText(r[c])
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// CountText says how many rows were printed of how many the table holds,
// and where its files are.
func (t Table) CountText() string {
	return fmt.Sprintf("%d of %s of %s (%s under %s)", len(t.Rows), textfmt.Plural(t.TotalRows, "row"), t.Table, textfmt.Plural(int64(t.Files), "file"), t.Path)
}

// cellText is a value on one line of the table: no control characters
// (a tab or newline would break the columns, an escape the terminal), at
// most maxCell runes.
func cellText(v any) string {
	var s string
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		s = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(b)
		}
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > maxCell {
		s = string(r[:maxCell-1]) + "…"
	}
	return s
}
