package status

import (
	"fmt"
	"io"
	"strings"
	"time"

	tablepkg "github.com/syncd-dev/syncd/internal/table"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteText writes the view for a person: the text form of what
// `state show -o json` prints and a daemon serves at /status.
func (v View) WriteText(w io.Writer) {
	if v.Source == "daemon" {
		fmt.Fprintf(w, "(read from the running syncd's /status: %s is in use by it)\n", v.State)
	}
	for _, f := range v.Forms {
		kind := "form" // a form's key is its id; another source's stream is source/stream
		if _, key := tablepkg.SplitStreamKey(f.Stream); strings.Contains(key, "/") {
			kind = "stream"
		}
		fmt.Fprintf(w, "%s %s: %s in %s", kind, f.Stream, textfmt.Plural(f.Rows, "row"), textfmt.Plural(f.Batches, "batch"))
		if f.LastSuccess != nil {
			fmt.Fprintf(w, ", last success %s", f.LastSuccess.Format(time.RFC3339))
		}
		if f.FreshnessSeconds != nil {
			fmt.Fprintf(w, ", fresh to %s (%s ago)", textfmt.Time(*f.FreshTo), textfmt.Age(time.Duration(*f.FreshnessSeconds*float64(time.Second))))
		} else if len(f.Committed) > 0 && !f.NotConfigured {
			fmt.Fprintf(w, ", not complete: nothing committed from the form's start on (committed from %s; backfill the range before it)", textfmt.Time(f.Committed[0].Start))
		}
		fmt.Fprintln(w)
		if f.Layout != "" {
			fmt.Fprintf(w, "  files partitioned by %s\n", LayoutWords(f.Layout))
		}
		for _, iv := range f.Committed {
			fmt.Fprintf(w, "  committed [%s, %s)\n", textfmt.Time(iv.Start), textfmt.Time(iv.End))
		}
		for _, in := range f.OpenBatches {
			fmt.Fprintf(w, "  open batch %s [%s, %s) since %s\n", in.BatchID, textfmt.Time(in.Start), textfmt.Time(in.End), in.CreatedAt.Format(time.RFC3339))
		}
		if f.Refresh != nil {
			fmt.Fprintf(w, "  refresh of table %s under way since %s: the next pass finishes it\n", f.Refresh.Table, f.Refresh.RequestedAt.Format(time.RFC3339))
		}
		if rc := f.Reconcile; rc.Last != nil || rc.IndexedFrom != nil {
			last := "never"
			if rc.Last != nil {
				last = rc.Last.Format(time.RFC3339)
			}
			fmt.Fprintf(w, "  reconcile: last %s; %s read again, %s, %s written; %s indexed", last, textfmt.Plural(rc.Windows, "window"),
				textfmt.Plural(rc.Versions, "new version"), textfmt.Plural(rc.Tombstones, "tombstone"), textfmt.Plural(rc.Indexed, "row"))
			if rc.IndexedFrom != nil {
				if rc.IndexedFrom.Equal(time.Unix(0, 0)) {
					fmt.Fprint(w, " from the form's beginning")
				} else {
					fmt.Fprintf(w, " from %s", rc.IndexedFrom.Format(time.RFC3339))
				}
			}
			fmt.Fprintln(w)
		}
		if f.Damaged != "" {
			fmt.Fprintf(w, "  DAMAGED: %s\n", f.Damaged)
		}
		if f.LastError != "" {
			fmt.Fprintf(w, "  last error: %s\n", f.LastError)
		}
		if f.NotConfigured {
			fmt.Fprintf(w, "  no longer in the configuration: not synced; `syncd state forget %s` removes this record\n", f.Stream)
		}
	}
	if len(v.Forms) == 0 {
		fmt.Fprintln(w, "no form has been synced yet")
	}
}

// LayoutWords says what a table's layout (sink.Layout) makes of its
// files, for a person.
func LayoutWords(layout string) string {
	switch layout {
	case "none":
		return "nothing (layout none: files in the table's folder)"
	case "year", "month", "day":
		return layout + " (layout " + layout + ")"
	}
	return layout
}
