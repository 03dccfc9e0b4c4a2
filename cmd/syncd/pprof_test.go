package main

import (
	"strings"
	"testing"
)

// TestPprofFlags: run, once and backfill take --pprof; other commands do
// not.
func TestPprofFlags(t *testing.T) {
	root, _ := newRoot(&strings.Builder{}, &strings.Builder{})
	for _, c := range root.Commands() {
		has := c.Flags().Lookup("pprof") != nil && c.Flags().Lookup("pprof-any-host") != nil
		if has != pprofCommands[c.Name()] {
			t.Errorf("command %s: --pprof present %v", c.Name(), has)
		}
	}
}
