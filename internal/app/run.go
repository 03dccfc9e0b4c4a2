package app

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/daemon"
)

// configWatchEvery is how often `syncd run` looks at its config file.
const configWatchEvery = 10 * time.Second

// RunOptions are what `syncd run` gives Run beyond the open App.
type RunOptions struct {
	// ConfigPath, when not "", is the configuration file the daemon
	// reloads its accounts from on SIGHUP and when the file changes.
	ConfigPath string
	// Stopping closes at the first SIGINT or SIGTERM: no new pass starts,
	// and the batches in flight may commit.
	Stopping <-chan struct{}
	Version  string
	// Beside, if set, starts what serves beside the daemon (the control
	// endpoint, internal/control, which builds on App and so cannot be
	// started from here): after the accounts are set up, and stopped
	// (stop) before they close.
	Beside func(ctx context.Context) (stop func())
}

// Run is `syncd run`: the daemon (internal/daemon) over the App's accounts
// until Stopping closes or ctx ends, reloading the accounts on SIGHUP and
// when the configuration file changes, and, with state.shared, under a
// coordinator that claims the accounts this replica owns and hands them
// back at the stop. A configuration the daemon cannot run with is a
// *daemon.ConfigError.
func (a *App) Run(ctx context.Context, ro RunOptions) error {
	// Accounts come and go without a restart: on SIGHUP, and when the
	// mounted config file changes (a ConfigMap update).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	hangup := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-hup:
				select {
				case hangup <- struct{}{}:
				default:
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	var load func() (*config.Config, error)
	// changes merges what makes the daemon reload its entries: the config
	// file changing, and the accounts this replica owns changing.
	changes := make(chan struct{}, 1)
	kick := func() {
		select {
		case changes <- struct{}{}:
		default:
		}
	}
	if ro.ConfigPath != "" {
		load = func() (*config.Config, error) { return config.Load(ro.ConfigPath, os.LookupEnv) }
		go func() {
			for range daemon.WatchFile(ctx, ro.ConfigPath, configWatchEvery) {
				kick()
			}
		}()
	}
	opts, err := a.DaemonOptions(ctx, ro.Stopping, ro.Version, load, hangup, changes)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if a.Cfg.State.Shared {
		coord, err := a.Coordinator(ctx, kick)
		if err != nil {
			return &daemon.ConfigError{Err: err}
		}
		defer coord.Close()
		a.Metrics.ReportOwned(coord.Owned)
		coordCtx, stopCoord := context.WithCancel(context.WithoutCancel(ctx))
		coordDone := make(chan struct{})
		go func() { defer close(coordDone); _ = coord.Run(coordCtx) }()
		defer func() {
			// SIGTERM: the passes have ended (daemon.Run returned); the
			// accounts close, then their leases go back at once so that
			// the other replicas take them at their next heartbeat.
			_ = a.CloseAccounts()
			drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if err := coord.Drain(drainCtx); err != nil {
				a.Log.Warn("handing the accounts back failed: the other replicas take them when the leases expire", zap.Error(err))
			}
			stopCoord()
			<-coordDone
		}()
	}
	if ro.Beside != nil {
		stop := ro.Beside(ctx)
		defer stop()
	}
	return daemon.Run(ctx, opts)
}
