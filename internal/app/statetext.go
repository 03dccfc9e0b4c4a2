package app

// The text of `syncd state backup`, `restore`, `adopt` and `forget`: what
// was backed up, removed, restored, kept, adopted and forgotten, beside
// what state and app return. The commands keep their flags, confirmations
// and exit codes.

import (
	"fmt"
	"io"
	"strconv"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/poller"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/textfmt"
)

// WriteBackedUp writes what a backup of the state (at where, StateWhere)
// of size bytes to target says, then each older backup --keep removed.
func WriteBackedUp(w io.Writer, where string, info state.BackupInfo, size int, target string) {
	fmt.Fprintf(w, "backed up state %s (%s, version %s, %s) to %s\n", where, textfmt.Plural(int64(info.Forms), "form"), info.Version, textfmt.Plural(int64(size), "byte"), target)
}

// WritePruned writes the older backups --keep removed (PruneBackups).
func WritePruned(w io.Writer, removed []string) {
	for _, r := range removed {
		fmt.Fprintf(w, "removed the older backup %s\n", r)
	}
}

// WriteRestored writes what a restore of the configured state from src
// says: info and aside are what state.Location.Restore returned.
func WriteRestored(w io.Writer, cfg *config.Config, src string, info state.BackupInfo, aside string) {
	if cfg.State.URL != "" {
		fmt.Fprintf(w, "restored state %s from %s (%s); it is now at version %s\n", cfg.State.URL, src, textfmt.Plural(int64(info.Forms), "form"), info.Version)
		return
	}
	fmt.Fprintf(w, "restored state file %s from %s (%s)", cfg.State.Path, src, textfmt.Plural(int64(info.Forms), "form"))
	if aside != "" {
		fmt.Fprintf(w, "; the file it replaced is %s", aside)
	}
	fmt.Fprintln(w)
}

// WriteKeptSignIns writes how many sign-ins of the replaced state a
// restore kept (KeepSecrets), when it kept any.
func WriteKeptSignIns(w io.Writer, n int) {
	if n > 0 {
		fmt.Fprintf(w, "kept the newer %s of the replaced state\n", textfmt.Plural(int64(n), "sign-in"))
	}
}

// WriteAdoptedRestored writes what AdoptRestored adopted after a restore.
func WriteAdoptedRestored(w io.Writer, batches, open int) {
	fmt.Fprintf(w, "adopted %s committed since the backup (%d part-written, fetched again by the next pass)\n", textfmt.Plural(int64(batches), "batch"), open)
}

// WriteAdoptResults writes the streams `syncd state adopt` adopted, a row
// each (the text form of its -o json).
func WriteAdoptResults(w io.Writer, results []poller.AdoptResult) error {
	rows := make([][]string, 0, len(results))
	for _, r := range results {
		rows = append(rows, []string{r.Stream, r.Table, strconv.Itoa(r.Batches), strconv.Itoa(r.Known), strconv.Itoa(r.Open),
			strconv.Itoa(r.Earlier), strconv.FormatInt(r.Rows, 10), strconv.Itoa(r.Indexed), strconv.Itoa(r.Windows)})
	}
	return textfmt.Table(w, []string{"STREAM", "TABLE", "ADOPTED", "KNOWN", "OPEN", "BEFORE RESET", "ROWS", "INDEXED", "WINDOWS"}, rows)
}

// ForgetKept is what forgetting the record of st leaves in the output, as
// the confirmation of `syncd state forget` and its summary say it.
func ForgetKept(st state.StreamState) string {
	if st.Rows > 0 || st.Batches > 0 {
		return fmt.Sprintf("the %s it wrote stay in the output, untouched", textfmt.Plural(st.Rows, "row"))
	}
	return "it wrote nothing to the output"
}

// WriteForgotten writes what `syncd state forget` says once the record of
// stream key is removed; kept is ForgetKept.
func WriteForgotten(w io.Writer, key, kept string) {
	fmt.Fprintf(w, "stream %s forgotten: its record is removed from the state; %s\n", key, kept)
}
