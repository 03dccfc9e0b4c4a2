//go:build linux

package state

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// releaseMapped drops the pages of db's map from the process's page tables
// (madvise MADV_DONTNEED); the page cache keeps them, and a later read maps
// a page again at the cost of a minor fault.
//
// bbolt reads through a shared, read-only map of the file and writes with
// pwrite, copy on write: every commit puts its pages in new places, so the
// pages a transaction read (the tail of the version index, an intent's kept
// change, the branch pages above them) are seldom read again, yet each
// stays mapped, with the neighbours the kernel maps around a fault, until
// the file is mapped anew. A 1M-row backfill so kept 11-20 MB of its 33 MB
// state file resident, a tenth of its peak RSS (bench/RESULTS.md,
// 2026-12-06, "after"). Under a read transaction, whose hold on bbolt's
// mmap lock keeps the map in place, nothing else can be at those addresses.
func releaseMapped(db *bolt.DB) {
	_ = db.View(func(tx *bolt.Tx) error {
		// Pages past tx.Size() hold nothing a reader follows; the
		// kernel rounds the length up to a page.
		if n := tx.Size(); n > 0 {
			syscall.Syscall(syscall.SYS_MADVISE, db.Info().Data, uintptr(n), syscall.MADV_DONTNEED)
		}
		return nil
	})
}
