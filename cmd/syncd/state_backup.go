package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/control"
	"github.com/syncd-dev/syncd/internal/state"
)

func newStateBackupCmd(g *globals) *cobra.Command {
	var keep int
	var every time.Duration
	cmd := &cobra.Command{
		Use:     "backup DEST",
		Short:   "Write a consistent copy of the state to a file or a bucket, also while syncd runs",
		Long:    fmt.Sprintf(help("state-backup.long"), state.BackupPrefix),
		Example: help("state-backup.example"),
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
			if err := app.BackupArgs(every, keep, state.IsFolder(dest)); err != nil {
				return withCode(exitUsage, err)
			}
			// Checked before the first backup, so that with --every too it
			// is exit 2 (a backup in a folder checks its new name again).
			if err := app.NotTheState(cfg, "state backup", app.StateLocation(cfg).BackupTarget(dest, time.Now())); err != nil {
				return withCode(exitUsage, err)
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
				case <-g.Stopping():
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
	where, loc := app.StateWhere(cfg), app.StateLocation(cfg)
	target := loc.BackupTarget(dest, time.Now())
	if err := app.NotTheState(cfg, "state backup", target); err != nil {
		return withCode(exitUsage, err)
	}
	var buf bytes.Buffer
	info, err := loc.Backup(ctx, &buf)
	if err != nil {
		return withCode(exitState, err)
	}
	if err := state.WriteBackup(ctx, target, buf.Bytes()); err != nil {
		return withCode(exitFailed, fmt.Errorf("write the backup of state %s to %s: %w", where, target, err))
	}
	app.WriteBackedUp(g.stdout, where, info, buf.Len(), target)
	if keep > 0 {
		removed, err := loc.PruneBackups(ctx, dest, keep)
		if err != nil {
			return withCode(exitFailed, fmt.Errorf("keep the newest %d backups in %s: %w", keep, dest, err))
		}
		app.WritePruned(g.stdout, removed)
	}
	return nil
}

func newStateRestoreCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "restore FILE",
		Short:   "Replace the state with a backup, after checking it (refused, exit 3, while a syncd runs: stop it first)",
		Long:    help("state-restore.long"),
		Example: help("state-restore.example"),
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
			if err := app.NotTheState(cfg, "state restore", args[0]); err != nil {
				return withCode(exitUsage, err)
			}
			ctx := cmd.Context()
			keep, err := app.KeepSecrets(ctx, cfg)
			if held, ok := control.HeldByDaemon(err); ok {
				return withCode(exitState, app.RestoreRefused(cfg, args[0], held))
			}
			if err != nil {
				return withCode(exitState, err)
			}
			raw, err := state.ReadBackup(ctx, args[0])
			if err != nil {
				return withCode(exitUsage, fmt.Errorf("read the backup %s: %w", args[0], err))
			}
			info, aside, err := app.StateLocation(cfg).Restore(ctx, cfg.State.LeaseTTL.D(), args[0], raw)
			if held, ok := control.HeldByDaemon(err); ok {
				return withCode(exitState, app.RestoreRefused(cfg, args[0], held))
			}
			if err != nil {
				return withCode(restoreCode(err), err)
			}
			app.WriteRestored(g.stdout, cfg, args[0], info, aside)
			return g.afterRestore(ctx, keep)
		},
	}
}

// afterRestore puts back the sign-ins the replaced state held, then adopts
// what the output holds of every stream (app.AdoptRestored). A failure
// leaves the restored state as it is and says what to run.
func (g *globals) afterRestore(ctx context.Context, keep func(context.Context, state.Store) (int, error)) error {
	a, err := g.openApp(ctx, false)
	if err != nil {
		return fmt.Errorf("the state is restored, but it could not be opened to adopt the output (%w): run `syncd state adopt` before the next pass, or the rows committed since the backup are written again", err)
	}
	defer a.Close()
	n, err := keep(ctx, a.Store)
	if err != nil {
		return withCode(exitFailed, fmt.Errorf("the state is restored, but %w: run `syncd auth login` before the next pass", err))
	}
	app.WriteKeptSignIns(g.stdout, n)
	batches, open, err := a.AdoptRestored(ctx)
	if err != nil {
		return withCode(exitFailed, err)
	}
	app.WriteAdoptedRestored(g.stdout, batches, open)
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
