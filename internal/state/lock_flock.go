//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// The writer lock is flock(2) on "<state file>.lock", not on the state file
// itself: bbolt already flocks that one, but only waits or times out, and
// cannot say who holds it. The lock file carries the holder's identity for
// the message a second syncd prints.
//
// flock belongs to the open file description, so the kernel drops it when the
// holder dies, even by SIGKILL: a lock file left by a dead process is taken
// at once. The file is never removed, because removing it would let a
// process that opened the old inode and one that creates a new one both hold
// "the" lock.

// errHeld means another open file description holds the lock.
var errHeld = errors.New("lock is held")

// fileLock is a held writer lock.
type fileLock struct {
	f *os.File
}

// lockExclusive takes the writer lock at path without waiting and records me
// in it. When another process holds it, it returns errHeld with the holder
// that process recorded (nil if unknown).
func lockExclusive(path string, me Holder) (*fileLock, *Holder, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, readHolder(f), errHeld
		}
		return nil, nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Written only once the lock is ours, so it never names a loser.
	b, err := json.Marshal(me)
	if err == nil {
		if err = f.Truncate(0); err == nil {
			_, err = f.WriteAt(append(b, '\n'), 0)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("write holder into lock file %s: %w", path, err)
	}
	return &fileLock{f: f}, nil, nil
}

// probeShared reports whether a writer holds the lock at path, and who, by
// trying a shared lock and letting it go at once. A missing lock file means
// no writer ever ran.
func probeShared(path string) (*Holder, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	defer f.Close()
	if err := flock(f, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return readHolder(f), errHeld
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return nil, flock(f, syscall.LOCK_UN)
}

// release empties the lock file, so that it names nobody, and unlocks it.
func (l *fileLock) release() error {
	terr := l.f.Truncate(0)
	return errors.Join(terr, l.f.Close()) // closing drops the flock
}

// unlockFile drops a flock taken through f, even while a memory map still
// holds the file open.
func unlockFile(f *os.File) error { return flock(f, syscall.LOCK_UN) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// readHolder parses what the holder wrote; nil when it wrote nothing (yet)
// or something unreadable.
func readHolder(f *os.File) *Holder {
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(f, 0, 1<<12), 1<<12))
	if err != nil {
		return nil
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil || h.PID == 0 {
		return nil
	}
	return &h
}
