package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/state"
	tablepkg "github.com/syncd-dev/syncd/internal/table"
)

// backupPrefix starts the name of every backup written into a folder or
// bucket prefix, so that --keep finds them (and only them).
const backupPrefix = "syncd-state-"

// backupStamp is the UTC time in a backup's name, after backupPrefix.
const backupStamp = "20060102T150405Z"

// minEvery is the shortest --every: each backup copies the whole state, so
// a shorter interval only loads the disk and, with --keep, prunes the very
// copies a backup is kept for.
const minEvery = time.Minute

func newStateBackupCmd(g *globals) *cobra.Command {
	var keep int
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "backup DEST",
		Short: "Write a consistent copy of the state to a file or a bucket, also while syncd runs",
		Long: "Write a consistent copy of the state to DEST, also while a syncd runs on it.\n" +
			"DEST is a file, or a folder or bucket prefix ending in '/' (gs://, s3://, azblob://,\n" +
			"file://), into which a file named " + backupPrefix + "<UTC time>.db (.json for state.url)\n" +
			"is written; --keep N then deletes all but the newest N so named there (never another\n" +
			"file, nor the state or its lock file should they live there). With --every the\n" +
			"command keeps running and backs up at that interval (a sidecar).\n" +
			"A state file is copied until two reads agree and the copy passes every checksum;\n" +
			"a state object is read at its current generation. A damaged state is refused.",
		Example: "  syncd state backup /backups/syncd.db\n  syncd state backup gs://my-lake/syncd/backups/ --keep 14 --every 24h",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, log, err := g.load()
			if err != nil {
				return err
			}
			if err := checkAccounts(cfg, g.accounts); err != nil {
				return err
			}
			dest := args[0]
			if every < 0 || every > 0 && every < minEvery {
				return withCode(exitUsage, fmt.Errorf("--every %s: give an interval of a minute or more (e.g. 24h), or leave --every out for one backup; nothing was written", every))
			}
			if keep < 0 || (keep > 0 && !isFolder(dest)) {
				return withCode(exitUsage, fmt.Errorf("--keep %d: it needs a DEST that is a folder or bucket prefix ending in '/', and N of 1 or more", keep))
			}
			// Checked before the first backup, so that with --every too it
			// is exit 2 (a backup in a folder checks its new name again).
			if err := notTheState(cfg, "state backup", backupTarget(cfg, dest)); err != nil {
				return err
			}
			ctx := cmd.Context()
			for {
				if err := backupOnce(ctx, g, cfg, dest, keep); err != nil {
					if every == 0 {
						return err
					}
					log.Error("state backup failed; the next one is tried at the interval", zap.Error(err))
				}
				if every == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-g.stopping:
					return nil
				case <-time.After(every):
				}
			}
		},
	}
	cmd.Flags().IntVar(&keep, "keep", 0, "with DEST a folder or prefix: keep only the newest N backups there")
	cmd.Flags().DurationVar(&every, "every", 0, "keep running and back up at this interval, a minute or more (e.g. 24h)")
	return cmd
}

func backupOnce(ctx context.Context, g *globals, cfg *config.Config, dest string, keep int) error {
	where := app.StateWhere(cfg)
	target := backupTarget(cfg, dest)
	if err := notTheState(cfg, "state backup", target); err != nil {
		return err
	}
	var buf bytes.Buffer
	var info state.BackupInfo
	var err error
	if cfg.State.URL != "" {
		info, err = state.BackupObject(ctx, cfg.State.URL, &buf)
	} else {
		info, err = state.BackupBolt(ctx, cfg.State.Path, &buf)
	}
	if err != nil {
		return withCode(exitState, err)
	}
	if err := writeTarget(ctx, target, buf.Bytes()); err != nil {
		return withCode(exitFailed, fmt.Errorf("write the backup of state %s to %s: %w", where, target, err))
	}
	fmt.Fprintf(g.stdout, "backed up state %s (%s, version %s, %s) to %s\n", where, plural(int64(info.Forms), "form"), info.Version, plural(int64(buf.Len()), "byte"), target)
	if keep > 0 {
		removed, err := prune(ctx, cfg, dest, keep)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("keep the newest %d backups in %s: %w", keep, dest, err))
		}
		for _, r := range removed {
			fmt.Fprintf(g.stdout, "removed the older backup %s\n", r)
		}
	}
	return nil
}

// backupTarget is where a backup to dest is written now: dest, or in a
// folder or bucket prefix a new file named by the time.
func backupTarget(cfg *config.Config, dest string) string {
	if !isFolder(dest) {
		return dest
	}
	ext := ".db"
	if cfg.State.URL != "" {
		ext = ".json"
	}
	return joinName(dest, backupPrefix+time.Now().UTC().Format(backupStamp)+ext)
}

func newStateRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Replace the state with a backup, after checking it (refused, exit 3, while a syncd runs: stop it first)",
		Long: "Replace the configured state with the backup FILE (a path or a bucket URL) that\n" +
			"`syncd state backup` wrote. The backup is checked whole first (every checksum, a format\n" +
			"this syncd reads); the restore is refused (exit 3) while a syncd holds the state: stop\n" +
			"it, restore, start it again (a daemon does not swap its state live). The state\n" +
			"it replaces is kept beside it (<state>.replaced-<UTC time>). Then the restored state\n" +
			"adopts what the output holds (`syncd state adopt`): batches committed after the backup\n" +
			"was taken count as committed, so nothing is written a second time. Sign-ins the\n" +
			"replaced state holds are kept: a backup's refresh token was rotated since, and is spent.",
		Example: "  syncd state restore /backups/syncd.db",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, _, err := g.load()
			if err != nil {
				return err
			}
			// Both are checked before the state is replaced: the adoption
			// after it opens the accounts, too late to refuse.
			if err := checkAccounts(cfg, g.accounts); err != nil {
				return err
			}
			if err := notTheState(cfg, "state restore", args[0]); err != nil {
				return err
			}
			ctx := cmd.Context()
			keep, err := app.KeepSecrets(ctx, cfg)
			if held, ok := control.HeldByDaemon(err); ok {
				return restoreRefused(cfg, args[0], held)
			}
			if err != nil {
				return withCode(exitState, err)
			}
			raw, err := readSource(ctx, args[0])
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("read the backup %s: %w", args[0], err))
			}
			if cfg.State.URL != "" {
				info, err := state.RestoreObject(ctx, state.ObjectOptions{URL: cfg.State.URL, LeaseTTL: cfg.State.LeaseTTL.D()}, raw)
				if held, ok := control.HeldByDaemon(err); ok {
					return restoreRefused(cfg, args[0], held)
				}
				if err != nil {
					return withCode(restoreCode(err), err)
				}
				fmt.Fprintf(g.stdout, "restored state %s from %s (%s); it is now at version %s\n", cfg.State.URL, args[0], plural(int64(info.Forms), "form"), info.Version)
				return g.afterRestore(ctx, keep)
			}
			local := args[0]
			if blobstore.IsURL(local) {
				dir, err := os.MkdirTemp("", "syncd-restore-")
				if err != nil {
					return withCode(exitFailed, err)
				}
				defer os.RemoveAll(dir)
				local = filepath.Join(dir, "backup.db")
				if err := os.WriteFile(local, raw, 0o600); err != nil {
					return withCode(exitFailed, err)
				}
			}
			info, aside, err := state.RestoreBolt(ctx, cfg.State.Path, local)
			if held, ok := control.HeldByDaemon(err); ok {
				return restoreRefused(cfg, args[0], held)
			}
			if err != nil {
				return withCode(restoreCode(err), err)
			}
			fmt.Fprintf(g.stdout, "restored state file %s from %s (%s)", cfg.State.Path, args[0], plural(int64(info.Forms), "form"))
			if aside != "" {
				fmt.Fprintf(g.stdout, "; the file it replaced is %s", aside)
			}
			fmt.Fprintln(g.stdout)
			return g.afterRestore(ctx, keep)
		},
	}
}

// restoreRefused is the one line a restore beside a running syncd gets
// (exit 3). The daemon does not swap its state live: its open store, its
// accounts' token sources and batches in flight, and on a shared state its
// leases, all stand on the state it opened; swapping it means stopping all
// of them, which is a restart, and a restart is what the line asks for.
func restoreRefused(cfg *config.Config, backup string, held *state.LockedError) error {
	msg := fmt.Sprintf("state restore is refused: the state %s is in use by a running syncd (%s): stop it (kubectl scale deployment/syncd --replicas=0, or systemctl stop syncd), run `syncd state restore %s`, then start it again; nothing was changed",
		app.StateWhere(cfg), held.Holder, backup)
	if cfg.State.Shared {
		msg += " (with state.shared: stop every replica)"
	}
	return withCode(exitState, errors.New(msg))
}

// afterRestore puts back the sign-ins the replaced state held, then adopts
// what the output holds of every stream, so that the batches committed
// after the backup was taken are never written again. A failure leaves the
// restored state as it is and says what to run.
func (g *globals) afterRestore(ctx context.Context, keep func(context.Context, state.Store) (int, error)) error {
	a, err := g.openApp(ctx, false)
	if err != nil {
		return fmt.Errorf("the state is restored, but it could not be opened to adopt the output (%w): run `syncd state adopt` before the next pass, or the rows committed since the backup are written again", err)
	}
	defer a.Close()
	if n, err := keep(ctx, a.Store); err != nil {
		return withCode(exitFailed, fmt.Errorf("the state is restored, but %w: run `syncd auth login` before the next pass", err))
	} else if n > 0 {
		fmt.Fprintf(g.stdout, "kept the newer %s of the replaced state\n", plural(int64(n), "sign-in"))
	}
	// The forms the restored state holds, beside the configured ones.
	list, err := a.Store.List(ctx)
	if err != nil {
		return withCode(exitFailed, err)
	}
	var batches, open int
	for _, acct := range a.Accounts {
		jobs, err := acct.Jobs(ctx)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("the state is restored, but the forms of account %s to adopt could not be listed (%w): run `syncd state adopt` before the next pass, or the rows committed since the backup are written again", acct.Name, err))
		}
		have := map[string]bool{}
		for _, j := range jobs {
			have[j.FormID] = true
		}
		for _, st := range list {
			ns, key := tablepkg.SplitStreamKey(st.FormID)
			if ns == acct.Cfg.Namespace() && acct.Client != nil && !have[key] && !strings.Contains(key, "/") {
				jobs = append(jobs, acct.Job(key))
			}
		}
		for _, t := range acct.AdoptTargets(jobs, true) {
			r, err := acct.Poller.Adopt(ctx, t)
			if err != nil {
				return withCode(exitFailed, fmt.Errorf("the state is restored, but %w: run `syncd state adopt` before the next pass", err))
			}
			batches += r.Batches
			open += r.Open
		}
	}
	fmt.Fprintf(g.stdout, "adopted %s committed since the backup (%d part-written, fetched again by the next pass)\n", plural(int64(batches), "batch"), open)
	return nil
}

// restoreCode is 3 when the state is held or unreadable, 1 otherwise.
func restoreCode(err error) int {
	var le *state.LockedError
	if errors.As(err, &le) {
		return exitState
	}
	return exitFailed
}

// checkAccounts refuses (exit 2) --account names the configuration lacks,
// for the commands that work on the whole state and open no account.
func checkAccounts(cfg *config.Config, names []string) error {
	if _, err := app.SelectAccounts(cfg, names); err != nil {
		return withCode(exitUsage, err)
	}
	return nil
}

// notTheState refuses (exit 2) a backup or restore whose other end is the
// configured state itself, or a file the state store keeps beside it (its
// lock file; a state object's lease, index or accounts' states). A backup
// is renamed into place: over the state file, it would unlink the file a
// running syncd holds open, which would go on committing to a file no one
// reads again; over the lock file, the next syncd would lock the new file
// while the running one still writes, and both would write the state.
func notTheState(cfg *config.Config, command, target string) error {
	part := statePart(cfg, target)
	if part == "" {
		return nil
	}
	why := "a copy written there would replace the file a running syncd holds, and lose what it commits next: give a file, or a folder ending in '/', elsewhere"
	if part != "the state" {
		why = "a copy written there would replace what keeps a second syncd from writing the state beside a running one: give a file, or a folder ending in '/', elsewhere"
	}
	if command == "state restore" {
		why = "give a backup that `syncd state backup` wrote"
	}
	if part == "the state" {
		part += " " + app.StateWhere(cfg) + " itself"
	} else {
		part += " " + app.StateWhere(cfg)
	}
	return withCode(exitUsage, fmt.Errorf("%s %s: that is %s: %s; nothing was written", command, target, part, why))
}

// isStateFile reports whether target names the configured state, or a file
// or object the state store keeps beside it (statePart).
func isStateFile(cfg *config.Config, target string) bool { return statePart(cfg, target) != "" }

// statePart says what of the configured state target names: "the state"
// (the same path or object once resolved, or the same file under another
// name), "the lock file of the state" (<state.path>.lock, which a writer
// holds), for a state.url "the lease of the state" (<url>.lease), "the
// index of the state" (under <url>.index/) or "an account's state beside
// the state" (under <url>.accounts/, state.shared); "" when none of them.
func statePart(cfg *config.Config, target string) string {
	if cfg.State.URL != "" {
		t, err1 := url.Parse(target)
		s, err2 := url.Parse(cfg.State.URL)
		if err1 != nil || err2 != nil || !blobstore.IsURL(target) || t.Scheme != s.Scheme || t.Host != s.Host {
			return ""
		}
		tp, sp := path.Clean("/"+t.Path), path.Clean("/"+s.Path)
		switch {
		case tp == sp:
			return "the state"
		case tp == sp+".lease":
			return "the lease of the state"
		case strings.HasPrefix(tp, sp+".index/"):
			return "the index of the state"
		case strings.HasPrefix(tp, sp+".accounts/"):
			return "an account's state beside the state"
		}
		return ""
	}
	if blobstore.IsURL(target) {
		u, err := url.Parse(target)
		if err != nil || u.Scheme != "file" {
			return ""
		}
		target = filepath.FromSlash(u.Path)
	}
	for _, c := range []struct{ path, part string }{
		{cfg.State.Path, "the state"},
		{cfg.State.Path + ".lock", "the lock file of the state"},
	} {
		if sameFile(target, c.path) {
			return c.part
		}
	}
	return ""
}

// sameFile reports whether the paths a and b name one file: the same path
// once made absolute, or the same file under another name.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	ab, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == ab {
		return true
	}
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// isFolder reports whether dest names a folder or a bucket prefix: it ends
// in '/' (before any query), or is a local folder that exists.
func isFolder(dest string) bool {
	if blobstore.IsURL(dest) {
		u, err := url.Parse(dest)
		return err == nil && strings.HasSuffix(u.Path, "/")
	}
	if strings.HasSuffix(dest, "/") || strings.HasSuffix(dest, string(filepath.Separator)) {
		return true
	}
	fi, err := os.Stat(dest)
	return err == nil && fi.IsDir()
}

// joinName appends a file name to a folder or bucket prefix.
func joinName(dir, name string) string {
	if blobstore.IsURL(dir) {
		u, _ := url.Parse(dir)
		u.Path = path.Join(u.Path, name)
		return u.String()
	}
	return filepath.Join(dir, name)
}

// openAt opens the bucket of a URL naming an object, keyed from its
// folder, and returns the object's name in it.
func openAt(ctx context.Context, raw string) (*blob.Bucket, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	dir, name := path.Split(u.Path)
	u.Path = dir
	loc, err := blobstore.Parse(u.String())
	if err != nil {
		return nil, "", err
	}
	b, err := blobstore.Open(ctx, loc, true)
	return b, name, err
}

func writeTarget(ctx context.Context, target string, raw []byte) error {
	if !blobstore.IsURL(target) {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		tmp := target + ".tmp"
		if err := os.WriteFile(tmp, raw, 0o600); err != nil {
			return err
		}
		f, err := os.Open(tmp)
		if err == nil {
			err = errors.Join(f.Sync(), f.Close())
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
		return os.Rename(tmp, target)
	}
	b, name, err := openAt(ctx, target)
	if err != nil {
		return err
	}
	defer b.Close()
	return b.Upload(ctx, name, bytes.NewReader(raw), &blob.WriterOptions{ContentType: "application/octet-stream"})
}

func readSource(ctx context.Context, src string) ([]byte, error) {
	if !blobstore.IsURL(src) {
		return os.ReadFile(src)
	}
	b, name, err := openAt(ctx, src)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return b.ReadAll(ctx, name)
}

// isBackupName reports whether name is one state backup writes into a
// folder: backupPrefix, its UTC time, .db or .json.
func isBackupName(name string) bool {
	stamp, ok := strings.CutPrefix(name, backupPrefix)
	if !ok {
		return false
	}
	ext := path.Ext(stamp)
	if ext != ".db" && ext != ".json" {
		return false
	}
	_, err := time.Parse(backupStamp, strings.TrimSuffix(stamp, ext))
	return err == nil
}

// prune deletes all but the newest keep backups in dir; the names carry
// their UTC time, so their order is their age. Only names a backup is
// written under count, and never the state or a file the state store keeps
// beside it (statePart), should the state live there under such a name.
func prune(ctx context.Context, cfg *config.Config, dir string, keep int) ([]string, error) {
	backup := func(name string) bool {
		return isBackupName(name) && !isStateFile(cfg, joinName(dir, name))
	}
	var names []string
	if !blobstore.IsURL(dir) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !e.IsDir() && backup(e.Name()) {
				names = append(names, e.Name())
			}
		}
	} else {
		b, _, err := openAt(ctx, joinName(dir, "x"))
		if err != nil {
			return nil, err
		}
		defer b.Close()
		it := b.List(&blob.ListOptions{Prefix: backupPrefix, Delimiter: "/"})
		for {
			obj, err := it.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, err
			}
			if !obj.IsDir && backup(obj.Key) {
				names = append(names, obj.Key)
			}
		}
		sort.Strings(names)
		var removed []string
		for len(names) > keep {
			if err := b.Delete(ctx, names[0]); err != nil {
				return removed, err
			}
			removed = append(removed, joinName(dir, names[0]))
			names = names[1:]
		}
		return removed, nil
	}
	sort.Strings(names)
	var removed []string
	for len(names) > keep {
		p := filepath.Join(dir, names[0])
		if err := os.Remove(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
		names = names[1:]
	}
	return removed, nil
}
