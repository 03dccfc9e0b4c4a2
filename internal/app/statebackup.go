package app

// The rules of `syncd state backup` and `syncd state restore`: where the
// state lives, what a backup may not overwrite and a restore may not
// read, and the refusal of a restore beside a running syncd.

import (
	"errors"
	"fmt"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/state"
)

// StateLocation is where the configured state lives.
func StateLocation(cfg *config.Config) state.Location {
	return state.Location{URL: cfg.State.URL, Path: cfg.State.Path}
}

// NotTheState refuses a backup or restore whose other end is the
// configured state itself, or a file the state store keeps beside it (its
// lock file; a state object's lease, index or accounts' states). A backup
// is renamed into place: over the state file, it would unlink the file a
// running syncd holds open, which would go on committing to a file no one
// reads again; over the lock file, the next syncd would lock the new file
// while the running one still writes, and both would write the state.
func NotTheState(cfg *config.Config, command, target string) error {
	part := StateLocation(cfg).Part(target)
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
		part += " " + StateWhere(cfg) + " itself"
	} else {
		part += " " + StateWhere(cfg)
	}
	return fmt.Errorf("%s %s: that is %s: %s; nothing was written", command, target, part, why)
}

// RestoreRefused is the one line a restore beside a running syncd gets.
// The daemon does not swap its state live: its open store, its accounts'
// token sources and batches in flight, and on a shared state its leases,
// all stand on the state it opened; swapping it means stopping all of
// them, which is a restart, and a restart is what the line asks for.
func RestoreRefused(cfg *config.Config, backup string, held *state.LockedError) error {
	msg := fmt.Sprintf("state restore is refused: the state %s is in use by a running syncd (%s): stop it (kubectl scale deployment/syncd --replicas=0, or systemctl stop syncd), run `syncd state restore %s`, then start it again; nothing was changed",
		StateWhere(cfg), held.Holder, backup)
	if cfg.State.Shared {
		msg += " (with state.shared: stop every replica)"
	}
	return errors.New(msg)
}

// ForgetRefused refuses to forget the record of stream key (st) while the
// configuration still names it (configured: StreamConfigured), or while it
// has batches or a refresh under way, whose files may be in the output.
func ForgetRefused(configured func(key string) bool, st state.StreamState) error {
	key := st.Key
	if configured(key) {
		return fmt.Errorf("stream %s is still named by the configuration, so its next pass would record it again: remove it from the config first (or use `syncd state reset %s` to sync it again from the start); nothing was changed", key, key)
	}
	if n := len(st.Intents); n > 0 || st.Refresh != nil {
		batches := "1 open batch"
		if n != 1 {
			batches = fmt.Sprintf("%d open batches", n)
		}
		return fmt.Errorf("stream %s has %s (or a refresh) under way, whose files may be in the output: put it back in the config and run `syncd once` to resolve them, then remove it again and forget it; nothing was changed", key, batches)
	}
	return nil
}
