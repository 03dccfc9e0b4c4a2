//go:build !linux

package state

import bolt "go.etcd.io/bbolt"

// releaseMapped leaves the map as it is: only Linux's madvise is known to
// drop a shared file map's pages without touching the file.
func releaseMapped(*bolt.DB) {}
