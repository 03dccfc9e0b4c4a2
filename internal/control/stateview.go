package control

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/app"
	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/state"
	"github.com/syncd-dev/syncd/internal/status"
)

// ReadState is the state view that `state show` and the commands that
// list something per account print: read directly (read-only) when no syncd
// holds the state, and from the running daemon's /status when one does.
// query is added to the /status request ("?schema=1"). A failure to open
// the state, or to ask the daemon that holds it, is a *StateError; a
// failure to read the state once open is not.
func ReadState(ctx context.Context, cfg *config.Config, query string) (status.View, error) {
	st, err := app.OpenStore(ctx, cfg, true)
	if err == nil {
		defer st.Close()
		return readOpenState(ctx, cfg, st, query)
	}
	var le *state.LockedError
	if !errors.As(err, &le) || le.Foreign {
		return status.View{}, &app.StateError{Err: err}
	}
	return askDaemon(ctx, cfg, le, err, query)
}

// readOpenState is the view of the state st, which this process opened.
func readOpenState(ctx context.Context, cfg *config.Config, st state.Store, query string) (status.View, error) {
	list, err := st.List(ctx)
	if err != nil {
		return status.View{}, fmt.Errorf("read the state %s: %w", app.StateWhere(cfg), err)
	}
	v := status.Of(app.StateWhere(cfg), list, time.Now(), strings.Contains(query, "schema=1"))
	v.MarkConfigured(app.StreamConfigured(cfg))
	v.FromStart(app.StreamStart(cfg), time.Now())
	if strings.Contains(query, "accounts=1") {
		v.Accounts = app.AccountsView(func() *config.Config { return cfg }, st)(ctx, v)
	}
	if strings.Contains(query, "webhooks=1") {
		if v.Webhooks, err = app.WebhooksView(func() *config.Config { return cfg }, st)(ctx); err != nil {
			return status.View{}, &app.StateError{Err: err}
		}
	}
	return v, nil
}

// askDaemon is the view the syncd that holds the state (le; err is the
// failure to open it) serves at /status.
func askDaemon(ctx context.Context, cfg *config.Config, le *state.LockedError, err error, query string) (status.View, error) {
	v, aerr := status.Ask(ctx, cfg.Server.Addr, query)
	if aerr != nil {
		if notDaemon(cfg, le) {
			// A `syncd once`, backfill or other command holds the state: no
			// daemon serves its status, and server.addr is beside the point.
			return status.View{}, &app.StateError{Err: fmt.Errorf("state %s is in use by a syncd that is not a daemon (%s): a `syncd once`, `backfill` or another command writing it, which serves no /status; let it finish (or stop it) and run this again",
				le.Path, le.Holder)}
		}
		return status.View{}, &app.StateError{Err: fmt.Errorf("%w; and its status could not be read either: %v (is server.addr in this config the daemon's?)", err, aerr)}
	}
	return v, nil
}

// notDaemon reports whether the process that holds the state (held names
// it) runs on this host and is no `syncd run`: a daemon writes a control
// file beside the state, with its pid.
func notDaemon(cfg *config.Config, held *state.LockedError) bool {
	if held.Holder == nil || held.Holder.PID == 0 {
		return false
	}
	if host, err := os.Hostname(); err != nil || host != held.Holder.Host {
		return false
	}
	ci, err := Read(cfg)
	return errors.Is(err, os.ErrNotExist) || err == nil && ci.PID != held.Holder.PID
}
