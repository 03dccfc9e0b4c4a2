package main

import (
	"fmt"

	"github.com/syncd-dev/syncd/internal/config"
	"github.com/syncd-dev/syncd/internal/spool"
)

// checkSpool refuses, with exit 2, a command that syncs when its
// configuration's spool folder cannot be used (spool.CheckDir): before the
// state is opened or anything is fetched, not as every spooling batch
// failing with exit 1.
func (g *globals) checkSpool() error {
	cfg, _, err := g.load()
	if err != nil {
		return err
	}
	if g.noConfig {
		return errNoConfig(cfg)
	}
	return refuseUnusableSpool(cfg)
}

// refuseUnusableSpool is checkSpool with the configuration loaded.
func refuseUnusableSpool(cfg *config.Config) error {
	if _, err := spool.CheckDir(cfg.Sync.SpoolDir); err != nil {
		return withCode(exitUsage, fmt.Errorf("%w; nothing was synced", err))
	}
	return nil
}
