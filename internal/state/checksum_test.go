package state

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestDamagedRecord: a record that fails its checksum or its content
// checks makes its form unreadable with an error that names the form and
// both remedies; the other forms work; `state reset` replaces the record
// and moves the form to a generation after the damaged one's.
func TestDamagedRecord(t *testing.T) {
	tpl, _, _ := writeTemplate(t)
	flip := func(tx *bolt.Tx) error {
		forms := tx.Bucket(formsBucket)
		val := append([]byte(nil), forms.Get([]byte("form-03"))...)
		val[len(val)/2] ^= 0x01
		return forms.Put([]byte("form-03"), val)
	}
	seal := func(body string) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			val, _ := sealRecord([]byte("form-03"), []byte(body))
			return tx.Bucket(formsBucket).Put([]byte("form-03"), val)
		}
	}
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx) error
	}{
		{"one bit flipped", flip},
		{"checksum cut off", func(tx *bolt.Tx) error { return tx.Bucket(formsBucket).Put([]byte("form-03"), []byte("{}")) }},
		{"not JSON", seal(`{"form_id":`)},
		{"under another form's key", seal(`{"form_id":"form-04"}`)},
		{"committed windows not merged", seal(`{"form_id":"form-03","committed":[{"start":"2026-03-01T00:05:00Z","end":"2026-03-01T00:07:00Z"},{"start":"2026-03-01T00:06:00Z","end":"2026-03-01T00:08:00Z"}]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			path := filepath.Join(t.TempDir(), "syncd.db")
			must(t, os.WriteFile(path, tpl, 0o600))
			// Seal the bad content with a valid record checksum where the
			// case says so; the manifest then still disagrees only if the
			// case left it alone, which the read-only open below sees.
			rewrite(t, path, func(tx *bolt.Tx) error {
				if err := tt.damage(tx); err != nil {
					return err
				}
				// Keep the manifest's checksum of form-03 in step with a
				// record sealed on purpose, so that only the record's
				// content is wrong.
				man, err := openManifest(tx.Bucket(metaBucket).Get(manifestKey))
				if err != nil {
					return err
				}
				if _, crc, err := openRecord([]byte("form-03"), tx.Bucket(formsBucket).Get([]byte("form-03"))); err == nil {
					e := man["form-03"]
					e.CRC = crc
					man["form-03"] = e
				}
				raw, err := sealManifest(man)
				if err != nil {
					return err
				}
				return tx.Bucket(metaBucket).Put(manifestKey, raw)
			})

			st := openW(t, path, nil)
			_, err := st.Get(ctx, "form-03")
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Form != "form-03" {
				t.Fatalf("Get of the damaged form: %v, want a *CorruptError naming form-03", err)
			}
			for _, want := range []string{path, "form-03", "restore it from a backup", "syncd state restore", "syncd state reset form-03"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if err := st.Commit(ctx, "form-03", Commit{Window: iv(200, 201)}); !errors.As(err, &ce) {
				t.Errorf("a commit over the damaged record: %v, want the damage", err)
			}
			if fs, err := st.Get(ctx, "form-04"); err != nil || len(fs.Committed) == 0 {
				t.Errorf("another form: %+v, %v", fs, err)
			}
			list, err := st.List(ctx)
			must(t, err)
			damaged := 0
			for _, fs := range list {
				if fs.Damaged != "" {
					damaged++
					if fs.Key != "form-03" || !strings.Contains(fs.Damaged, "syncd state reset form-03") {
						t.Errorf("listed as damaged: %s: %s", fs.Key, fs.Damaged)
					}
				}
			}
			if damaged != 1 || len(list) != 24 {
				t.Errorf("List: %d forms, %d damaged; want 24 and 1", len(list), damaged)
			}
			must(t, st.Reset(ctx, "form-03"))
			fs, err := st.Get(ctx, "form-03")
			if err != nil || len(fs.Committed) != 0 || fs.Generation != 1 {
				t.Fatalf("after reset: %+v, %v; want an empty form at generation 1", fs, err)
			}
			must(t, st.Close())
			// The repaired file opens whole.
			openR(t, path)
		})
	}
}

// TestMigrateVersion1 writes a state file the way version 1 did (JSON
// values, no checksums, no manifest): readers read it as it is, and the
// first writer migrates it to the current version without changing a form.
func TestMigrateVersion1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "syncd.db")
	forms := map[string]StreamState{
		"a": {Key: "a", Committed: Intervals{iv(0, 5)}, Rows: 7, Batches: 2, Generation: 3, Schema: json.RawMessage(`{"c":1}`)},
		"b": {Key: "b", Committed: Intervals{iv(1, 2), iv(3, 4)}, Intents: map[string]Intent{"x": {BatchID: "x", Table: "t", Start: m(4), End: m(5)}}},
	}
	db, err := bolt.Open(path, 0o600, nil)
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		fb, err := tx.CreateBucket(formsBucket)
		if err != nil {
			return err
		}
		for id, st := range forms {
			body, err := encode(&st)
			if err != nil {
				return err
			}
			if err := fb.Put([]byte(id), body); err != nil {
				return err
			}
		}
		mb, err := tx.CreateBucket(metaBucket)
		if err != nil {
			return err
		}
		return mb.Put(versionKey, []byte("1"))
	}))
	must(t, db.Close())

	check := func(st *Bolt) {
		t.Helper()
		for id, want := range forms {
			got, err := st.Get(ctx, id)
			must(t, err)
			if got.Rows != want.Rows || got.Generation != want.Generation || len(got.Committed) != len(want.Committed) || len(got.Intents) != len(want.Intents) || string(got.Schema) != string(want.Schema) {
				t.Errorf("form %s: %+v, want %+v", id, got, want)
			}
		}
	}
	r := openR(t, path)
	if r.version != 1 {
		t.Fatalf("a version 1 file read as version %d", r.version)
	}
	check(r)
	must(t, r.Close())

	w := openW(t, path, nil)
	if w.version != formatVersion {
		t.Fatalf("the writer left the file at version %d", w.version)
	}
	check(w)
	must(t, w.Close())

	db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	must(t, db.View(func(tx *bolt.Tx) error {
		if v := string(tx.Bucket(metaBucket).Get(versionKey)); v != strconv.Itoa(formatVersion) {
			t.Errorf("format_version %q after the migration", v)
		}
		man, err := openManifest(tx.Bucket(metaBucket).Get(manifestKey))
		if err != nil {
			return err
		}
		if len(man) != 2 || man["a"].Gen != 3 {
			t.Errorf("manifest %+v", man)
		}
		return tx.Bucket(formsBucket).ForEach(func(k, v []byte) error {
			_, crc, err := openRecord(k, v)
			if err != nil || crc != man[string(k)].CRC {
				t.Errorf("record %s after the migration: crc %08x, %v", k, crc, err)
			}
			return nil
		})
	}))
}

// A state file whose damaged page makes bbolt's cursor walk forever (a byte
// flip found by TestStateByteFlips: the process grew to 16 GB) is refused
// with a CorruptError at open, read-only and for writing, never walked.
func TestLoopingPageGraphIsRefused(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		raw, err := os.ReadFile("testdata/looping-tree.db")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "syncd.db")
		if err := os.WriteFile(p, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := OpenBolt(t.Context(), BoltOptions{Path: p, ReadOnly: readOnly})
		var ce *CorruptError
		if !errors.As(err, &ce) {
			if st != nil {
				st.Close()
			}
			t.Fatalf("read-only %v: open of a file whose tree loops: %v, want a *CorruptError", readOnly, err)
		}
	}
}
