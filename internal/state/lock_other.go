//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package state

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

var errHeld = errors.New("lock is held")

type fileLock struct{}

// lockExclusive refuses: the writer lock needs flock(2), and running two
// writers unguarded could interleave their batches.
func lockExclusive(string, Holder) (*fileLock, *Holder, error) {
	return nil, nil, fmt.Errorf("the state writer lock needs flock(2), which %s lacks: run syncd on Linux, macOS or a BSD", runtime.GOOS)
}

// probeShared finds no writer: bbolt's own lock still keeps a read-only open
// from overlapping one.
func probeShared(string) (*Holder, error) { return nil, nil }

func (*fileLock) release() error { return nil }

func unlockFile(*os.File) error { return nil }
