//go:build unix

package control

import (
	"os"
	"syscall"
)

// fileOwner is the uid that owns fi; ok is false where it is unknown.
func fileOwner(fi os.FileInfo) (uid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
