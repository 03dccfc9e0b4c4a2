// Command syncd copies form submissions from the Forms API and bookings
// from the scheduling API into Parquet files or BigQuery tables, exactly
// once, on a schedule or in one pass. It is flags, exit codes and printing:
// the work is done by internal/app and the packages below it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"golang.org/x/term"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/gcpolicy"
	"github.com/syncd-dev/syncd/internal/progress"
	"github.com/syncd-dev/syncd/internal/shutdown"
)

// Exit codes, documented in the README.
const (
	exitOK     = 0
	exitFailed = 1 // one or more streams failed; the others committed
	exitUsage  = 2 // bad flags or configuration
	exitState  = 3 // the state store could not be opened (locked, corrupt)
	// A pass stopped by SIGINT (130) or SIGTERM (143) exits 128 + the
	// signal: what it committed stays committed, the rest comes next time.
	exitInterrupted = shutdown.ExitInterrupted
)

// poisonEnv set to 1 overwrites every Arrow buffer as it is freed
// (app.Options.PoisonFreedBuffers): `make test` and `make chaos` set it for
// the syncd they run, so that a buffer read after it was freed shows as
// wrong output. It costs CPU and is not meant for production.
const poisonEnv = "SYNCD_POISON_FREED_BUFFERS"

// exitError carries an exit code to main.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	root, g := newRoot(os.Stdout, os.Stderr)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops new work and gives batches in flight the
		// grace period to commit; the second, or the end of the grace,
		// abandons them (their intents are resolved on the next start).
		g.Stop(cancel, <-sigs)
		<-sigs
		cancel()
	}()
	err := root.ExecuteContext(ctx)
	cancel()
	os.Exit(g.finalCode(exitCode(err, os.Stderr)))
}

// finalCode is the process's exit code: a command that failed (exit 1)
// after a signal arrived was stopped by it, wherever it was (checking the
// form ids, say, before any pass began), and exits as a stopped pass does.
func (g *globals) finalCode(code int) int {
	if c, stopped := g.Interruption(); stopped && code == exitFailed {
		return c
	}
	return code
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && !errors.Is(ee.err, errReported) {
			fmt.Fprintln(stderr, "syncd:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "syncd:", err)
	return exitUsage // cobra's own errors are about flags and arguments
}

// errReported marks a failure whose details were already printed.
var errReported = errors.New("reported")

// globals are the flags every command shares.
type globals struct {
	configPath string
	accounts   []string   // --account: the accounts a command works on
	shard      *app.Shard // --shard of once and backfill
	logLevel   string
	logFormat  string
	stdout     io.Writer
	stderr     io.Writer

	memOnce  sync.Once
	noteOnce sync.Once // the line that says which configuration is used
	noConfig bool      // no configuration file: the built-in defaults
	// The first SIGINT/SIGTERM drains, the second cancels.
	*shutdown.Shutdown
}

func newRoot(stdout, stderr io.Writer) (*cobra.Command, *globals) {
	g := &globals{stdout: stdout, stderr: stderr, Shutdown: shutdown.New()}
	root := &cobra.Command{
		Use:           "syncd",
		Short:         "Copy form submissions and bookings into Parquet or BigQuery, exactly once",
		SilenceUsage:  true,
		SilenceErrors: true,
		Example:       help("syncd.example"),
		// Bare `syncd` is a mistake, not a success: help on stderr, exit 2.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Help()
			return withCode(exitUsage, errors.New("no command given: pick one of the commands above"))
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVarP(&g.configPath, "config", "c", os.Getenv("SYNCD_CONFIG"), "configuration file (YAML); env SYNCD_CONFIG")
	root.PersistentFlags().StringArrayVar(&g.accounts, "account", nil, "work on this account of the config's accounts list (repeatable; default: every account)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "", "debug, info, warn or error (overrides log.level)")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "", "auto, json or console (overrides log.format)")
	root.AddCommand(
		newOnceCmd(g),
		newRunCmd(g),
		newBackfillCmd(g),
		newRefreshCmd(g),
		newReconcileCmd(g),
		newAuthCmd(g),
		newAccountsCmd(g),
		newFormsCmd(g),
		newSchemaCmd(g),
		newStateCmd(g),
		newValidateCmd(g),
		newVersionCmd(g),
		newConfigCmd(g),
		newWebhooksCmd(g),
		newRowsCmd(g),
		newTablesCmd(g),
		newCompactCmd(g),
	)
	addPprofFlags(root, g)
	suggestCommands(root)
	return root, g
}

// load reads the configuration and builds the logger it asks for.
func (g *globals) load() (*config.Config, *zap.Logger, error) {
	cfg, path, err := app.LoadConfig(g.configPath, os.LookupEnv)
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	g.noConfig = path == ""
	g.noteOnce.Do(func() {
		if note := app.ConfigNote(g.configPath, path, cfg); note != "" {
			fmt.Fprint(g.stderr, note)
		}
	})
	if g.logLevel != "" {
		cfg.Log.Level = g.logLevel
	}
	if g.logFormat != "" {
		cfg.Log.Format = g.logFormat
	}
	log, err := app.NewLogger(cfg.Log, progress.LineClearer{W: g.stderr}, isTerminal(g.stderr))
	if err != nil {
		return nil, nil, withCode(exitUsage, err)
	}
	g.memOnce.Do(func() { gcpolicy.SetMemoryLimit(log) })
	return cfg, log, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// errNoConfig refuses a command that writes (a pass, a backfill, a change
// to the state) when no configuration file was found.
func errNoConfig(cfg *config.Config) error {
	return withCode(exitUsage, app.ErrNoConfig(cfg))
}
