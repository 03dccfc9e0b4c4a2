package app

import (
	"fmt"
	"io"
	"time"

	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteText writes the plan for a person: what --dry-run prints without
// -o json.
func (p Plan) WriteText(w io.Writer) {
	fmt.Fprintf(w, "DRY RUN of syncd %s: nothing is written (no output, no state)\n", p.Command)
	for _, f := range p.Forms {
		if f.Error != "" {
			fmt.Fprintf(w, "FAIL %s: %s\n", f.FormID, f.Error)
			continue
		}
		if len(f.Windows) == 0 {
			fmt.Fprintf(w, "form %s -> %s: nothing to fetch in [%s, %s)\n", f.FormID, f.Table, textfmt.Time(f.From), textfmt.Time(f.To))
			continue
		}
		fmt.Fprintf(w, "form %s -> %s: %s in %s, about %s\n", f.FormID, f.Table, textfmt.Plural(f.Rows, "row"),
			textfmt.Plural(int64(len(f.Windows)), "window"), textfmt.Plural(f.Requests, "request"))
		for _, win := range f.Windows {
			open := ""
			if win.Open {
				open = " (open batch of an earlier run)"
			}
			fmt.Fprintf(w, "  window [%s, %s): %s, %s%s\n", textfmt.Time(win.Start), textfmt.Time(win.End), textfmt.Plural(int64(win.Rows), "row"),
				textfmt.Plural(win.Requests, "request"), open)
		}
	}
	fmt.Fprintf(w, "%s, %s, about %s: at least %s at source.rate_limit %g/s\n", textfmt.Plural(int64(len(p.Forms)), "form"), textfmt.Plural(p.Rows, "row"),
		textfmt.Plural(p.Requests, "request"), (time.Duration(p.Seconds * float64(time.Second))).Round(100*time.Millisecond), p.RateLimit)
	if b := p.Bookings; b != nil {
		b.writeLine(w, "bookings", " to the scheduling API")
	}
	for _, s := range p.Streams {
		s.writeLine(w, "stream", "")
	}
}

// writeLine writes the plan of a stream of a source other than the forms
// (kind: bookings, stream) on one line.
func (s StreamPlan) writeLine(w io.Writer, kind string, to string) {
	if s.Error != "" {
		fmt.Fprintf(w, "FAIL %s: %s\n", s.FormID, s.Error)
		return
	}
	fmt.Fprintf(w, "%s %s -> %s: %s in %s, about %s%s\n", kind, s.FormID, s.Table, textfmt.Plural(s.Rows, "row"),
		textfmt.Plural(int64(len(s.Windows)), "window"), textfmt.Plural(s.Requests, "request"), to)
}
