package state

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestBackupWhileWriting takes backups of a state file while a writer
// commits to it: each is consistent (passes every checksum) and holds a
// prefix of the writer's commits. A restore is refused while the writer
// holds the file and replaces it once it stopped, keeping the old file.
func TestBackupWhileWriting(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "syncd.db")
	st := openW(t, path, nil)
	const commits = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range commits {
			id := fmt.Sprintf("form-%d", k%5)
			if err := st.Commit(ctx, id, Commit{Window: iv(k, k+1), Rows: 1}); err != nil {
				t.Errorf("commit %d: %v", k, err)
				return
			}
		}
	}()
	var backups []string
	for i := 0; i < 6; i++ {
		var buf bytes.Buffer
		if _, err := BackupBolt(ctx, path, &buf); err != nil {
			t.Fatalf("backup %d while writing: %v", i, err)
		}
		p := filepath.Join(dir, fmt.Sprintf("backup-%d.db", i))
		must(t, os.WriteFile(p, buf.Bytes(), 0o600))
		backups = append(backups, p)
	}
	wg.Wait()
	for _, p := range backups {
		info, err := VerifyBackup(ctx, p)
		if err != nil {
			t.Fatalf("backup %s: %v", p, err)
		}
		b := openR(t, p)
		total := int64(0)
		list, err := b.List(ctx)
		must(t, err)
		for _, fs := range list {
			total += fs.Rows
		}
		if info.Forms != len(list) || total > commits {
			t.Errorf("backup %s: %d forms, %d rows", p, info.Forms, total)
		}
	}
	last := backups[len(backups)-1]

	_, _, err := RestoreBolt(ctx, path, last)
	var le *LockedError
	if !errors.As(err, &le) {
		t.Fatalf("restore while the writer holds the file: %v, want a LockedError", err)
	}
	must(t, st.Close())
	info, aside, err := RestoreBolt(ctx, path, last)
	if err != nil {
		t.Fatal(err)
	}
	if aside == "" {
		t.Fatal("the replaced file was not kept")
	}
	if _, err := os.Stat(aside); err != nil {
		t.Fatalf("the replaced file: %v", err)
	}
	r := openW(t, path, nil)
	list, err := r.List(ctx)
	must(t, err)
	if len(list) != info.Forms {
		t.Errorf("restored %d forms, the state holds %d", info.Forms, len(list))
	}
}

// TestBackupRefusesDamage: a backup is never taken of, nor restored from,
// a file that fails its checks, and a newer format is named as such.
func TestBackupRefusesDamage(t *testing.T) {
	tpl, _, _ := writeTemplate(t)
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx) error
		want   string
	}{
		{"a record flipped", func(tx *bolt.Tx) error {
			forms := tx.Bucket(formsBucket)
			val := append([]byte(nil), forms.Get([]byte("form-07"))...)
			val[10] ^= 0x40
			return forms.Put([]byte("form-07"), val)
		}, "form-07"},
		{"newer format", func(tx *bolt.Tx) error { return tx.Bucket(metaBucket).Put(versionKey, []byte("9")) }, "newer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			dir := t.TempDir()
			bad := filepath.Join(dir, "bad.db")
			must(t, os.WriteFile(bad, tpl, 0o600))
			rewrite(t, bad, tt.damage)
			if _, err := BackupBolt(ctx, bad, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("backup of a damaged file: %v, want an error naming %q", err, tt.want)
			}
			live := filepath.Join(dir, "syncd.db")
			must(t, os.WriteFile(live, tpl, 0o600))
			if _, _, err := RestoreBolt(ctx, live, bad); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("restore from a damaged backup: %v, want an error naming %q", err, tt.want)
			}
			if now, _ := os.ReadFile(live); !bytes.Equal(now, tpl) {
				t.Error("a refused restore changed the state file")
			}
		})
	}
}

// TestObjectBackupRestore: the state object is backed up at its current
// version and restored under the lease, on each store.
func TestObjectBackupRestore(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		o := openT(t, ObjectOptions{URL: url}, true)
		must(t, o.Commit(ctx, "f1", Commit{Window: win(0), Rows: 4}))
		var buf bytes.Buffer
		info, err := BackupObject(ctx, url, &buf) // while the writer holds the lease
		if err != nil || info.Forms != 1 {
			t.Fatalf("backup: %+v, %v", info, err)
		}
		must(t, o.Commit(ctx, "f1", Commit{Window: win(1), Rows: 5}))
		if _, err := RestoreObject(ctx, ObjectOptions{URL: url}, buf.Bytes()); err == nil || !strings.Contains(err.Error(), "in use by another syncd") {
			t.Fatalf("restore while a writer holds the lease: %v", err)
		}
		must(t, o.Close())
		if _, err := RestoreObject(ctx, ObjectOptions{URL: url}, []byte(`{"format_version":7}`)); err == nil || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("restore of a newer format: %v", err)
		}
		if _, err := RestoreObject(ctx, ObjectOptions{URL: url}, buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		fs, err := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false).Get(ctx, "f1")
		if err != nil || fs.Rows != 4 {
			t.Fatalf("after the restore: %+v, %v; want the backup's 4 rows", fs, err)
		}
	})
}
