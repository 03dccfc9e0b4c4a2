package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/syncd-dev/syncd/internal/testkit/lakes"
)

var it0 = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// at is an instant i seconds after it0.
func at(i int) time.Time { return it0.Add(time.Duration(i) * time.Second) }

func uuidOf(i int) string { return fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(i*7919), i) }

func ent(id string, t int, ver int) Entry {
	return Entry{ID: id, Version: Version{Time: at(t), Hash: TimeVersion(at(1000 + ver))}}
}

// indexStores runs fn over the state file and each object store, with
// chunks of at most max records (small: small).
func indexStores(t *testing.T, lim chunkLimits, fn func(t *testing.T, st Store)) {
	t.Run("bolt", func(t *testing.T) {
		b := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
		b.chunks = lim
		fn(t, b)
	})
	eachStore(t, func(t *testing.T, url string) {
		o := openT(t, ObjectOptions{URL: url}, true)
		o.chunks = lim
		fn(t, o)
	})
}

// readIndex is the whole index of form, checked to come in time order.
func readIndex(t *testing.T, st Store, form string, from, to time.Time) map[string]Version {
	t.Helper()
	got := map[string]Version{}
	var last time.Time
	must(t, st.Versions(context.Background(), form, from, to, func(e Entry) error {
		if e.Time.Before(last) {
			t.Errorf("entry %s at %v comes after one at %v", e.ID, e.Time, last)
		}
		last = e.Time
		if _, dup := got[e.ID]; dup {
			t.Errorf("entry %s listed twice", e.ID)
		}
		got[e.ID] = e.Version
		return nil
	}))
	return got
}

func TestIndex(t *testing.T) {
	odd := "legacy/id with spaces"
	steps := []struct {
		name   string
		do     func(ctx context.Context, st Store) error
		put    []Entry  // what the index holds after the step, added
		remove []string // and removed
	}{
		{"first batch", func(ctx context.Context, st Store) error {
			c := &IndexChange{}
			for i := 10; i < 20; i++ {
				c.Put = append(c.Put, ent(uuidOf(i), i, 0))
			}
			return commitBatch(ctx, st, "b1", Interval{at(10), at(20)}, c)
		}, entries(10, 20, 0), nil},
		{"a batch after it starts chunks of its own", func(ctx context.Context, st Store) error {
			return commitBatch(ctx, st, "b2", Interval{at(20), at(26)}, &IndexChange{Put: entries(20, 26, 0)})
		}, entries(20, 26, 0), nil},
		{"a backfill before the first chunk", func(ctx context.Context, st Store) error {
			return commitBatch(ctx, st, "b0", Interval{at(0), at(10)}, &IndexChange{Put: append(entries(0, 4, 0), Entry{ID: odd, Version: Version{Time: at(2), Hash: 7}})})
		}, append(entries(0, 4, 0), Entry{ID: odd, Version: Version{Time: at(2), Hash: 7}}), nil},
		{"an edit replaces the version", func(ctx context.Context, st Store) error {
			return commitBatch(ctx, st, "r1", Interval{at(10), at(20)}, &IndexChange{Put: []Entry{ent(uuidOf(12), 12, 5)}})
		}, []Entry{ent(uuidOf(12), 12, 5)}, nil},
		{"a late import at an instant already indexed", func(ctx context.Context, st Store) error {
			return commitBatch(ctx, st, "r2", Interval{at(10), at(20)}, &IndexChange{Put: []Entry{ent(uuidOf(500), 15, 0)}})
		}, []Entry{ent(uuidOf(500), 15, 0)}, nil},
		{"deletions", func(ctx context.Context, st Store) error {
			return commitBatch(ctx, st, "r3", Interval{at(10), at(26)}, &IndexChange{Gone: []Entry{ent(uuidOf(11), 11, 0), ent(uuidOf(25), 25, 0), ent(uuidOf(999), 13, 0)}})
		}, nil, []string{uuidOf(11), uuidOf(25)}},
		{"an intent's change lands with its commit", func(ctx context.Context, st Store) error {
			in := Intent{BatchID: "r4", Table: "t", Start: at(0), End: at(40), Reconcile: true, Index: &IndexChange{Put: []Entry{ent(uuidOf(30), 30, 1)}, Gone: []Entry{ent(uuidOf(0), 0, 0)}}}
			if err := st.RecordIntent(ctx, "f", in); err != nil {
				return err
			}
			if n := len(readIndex(t, st, "f", at(-100), at(100))); n != 20 {
				return fmt.Errorf("the intent changed the index: %d records", n)
			}
			return st.Commit(ctx, "f", Commit{BatchID: "r4", Window: Interval{at(0), at(40)}})
		}, []Entry{ent(uuidOf(30), 30, 1)}, []string{uuidOf(0)}},
		{"a replayed commit changes nothing", func(ctx context.Context, st Store) error {
			return st.Commit(ctx, "f", Commit{BatchID: "r4", Window: Interval{at(0), at(40)}})
		}, nil, nil},
		{"a dropped intent's change never lands", func(ctx context.Context, st Store) error {
			in := Intent{BatchID: "r5", Table: "t", Start: at(0), End: at(40), Index: &IndexChange{Put: []Entry{ent(uuidOf(31), 31, 1)}}}
			if err := st.RecordIntent(ctx, "f", in); err != nil {
				return err
			}
			if err := st.DropIntent(ctx, "f", "r5"); err != nil {
				return err
			}
			return st.Commit(ctx, "f", Commit{BatchID: "r5", Window: Interval{at(40), at(41)}})
		}, nil, nil},
	}
	for _, lim := range []chunkLimits{{max: 4, small: 2}, {max: 1024, small: 256}} {
		t.Run(fmt.Sprintf("chunks of %d", lim.max), func(t *testing.T) {
			indexStores(t, lim, func(t *testing.T, st Store) {
				ctx := context.Background()
				want := map[string]Version{}
				for _, s := range steps {
					must(t, s.do(ctx, st))
					for _, e := range s.put {
						want[e.ID] = e.Version
					}
					for _, id := range s.remove {
						delete(want, id)
					}
					got := readIndex(t, st, "f", at(-100), at(100))
					if !maps.Equal(got, want) {
						t.Fatalf("%s: the index holds %d records %v, want %d %v", s.name, len(got), got, len(want), want)
					}
					fs, err := st.Get(ctx, "f")
					must(t, err)
					if fs.Indexed != int64(len(want)) {
						t.Fatalf("%s: Indexed = %d, want %d", s.name, fs.Indexed, len(want))
					}
					// A range reads exactly the records in it.
					part := readIndex(t, st, "f", at(3), at(21))
					for id, v := range want {
						_, in := part[id]
						if inside := !v.Time.Before(at(3)) && v.Time.Before(at(21)); in != inside {
							t.Fatalf("%s: range [3s, 21s) has %s (at %v): %v", s.name, id, v.Time, in)
						}
					}
				}
				// Another form's index is its own; a reset forgets the form's.
				if n := len(readIndex(t, st, "other", at(-100), at(100))); n != 0 {
					t.Errorf("form other has %d records", n)
				}
				must(t, st.Reset(ctx, "f"))
				if n := len(readIndex(t, st, "f", at(-100), at(100))); n != 0 {
					t.Errorf("after a reset the index holds %d records", n)
				}
			})
		})
	}
}

// commitBatch records the intent of a batch and commits it with change, as
// the poller does.
func commitBatch(ctx context.Context, st Store, batch string, w Interval, change *IndexChange) error {
	if err := st.RecordIntent(ctx, "f", Intent{BatchID: batch, Table: "t", Start: w.Start, End: w.End}); err != nil {
		return err
	}
	return st.Commit(ctx, "f", Commit{BatchID: batch, Window: w, Index: change})
}

func entries(from, to, ver int) []Entry {
	var out []Entry
	for i := from; i < to; i++ {
		out = append(out, ent(uuidOf(i), i, ver))
	}
	return out
}

func TestChunkEncoding(t *testing.T) {
	cases := []struct {
		name string
		es   []entry
		max  int // bytes per record at most
	}{
		{"uuids a second apart", []entry{{t: at(0).UnixMicro(), id: uuidOf(1), h: 1}, {t: at(1).UnixMicro(), id: uuidOf(2), h: 2}, {t: at(1).UnixMicro(), id: uuidOf(3), h: ^uint64(0)}}, 32},
		{"other ids kept as they are", []entry{{t: -5, id: "A-UPPER-CASE-ID", h: 3}, {t: 0, id: "", h: 4}, {t: 1 << 50, id: strings.Repeat("x", 300), h: 5}}, 400},
		{"an id like a uuid with upper case is not packed", []entry{{t: 1, id: strings.ToUpper(uuidOf(9)), h: 0}}, 64},
		{"empty", nil, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw := encodeChunk(c.es)
			got, err := decodeChunk(raw)
			must(t, err)
			if !slices.Equal(got, c.es) && len(c.es)+len(got) > 0 {
				t.Fatalf("round trip: %v, want %v", got, c.es)
			}
			if n := max(len(c.es), 1); (len(raw)-6)/n > c.max {
				t.Errorf("%d bytes for %d records", len(raw), len(c.es))
			}
			for i := range raw {
				bad := bytes.Clone(raw)
				bad[i] ^= 0x10
				if _, err := decodeChunk(bad); err == nil {
					t.Fatalf("a flipped bit in byte %d went unnoticed", i)
				}
			}
		})
	}
}

// TestCommitWritesGrowWithTheBatch: a commit of the same batch writes as
// much after 100,000 indexed records as after 10,000: the state written per
// batch grows with the batch, not with the history.
func TestCommitWritesGrowWithTheBatch(t *testing.T) {
	const batch = 1000
	written := func(history int) (pages int64, rewritten int) {
		b := openW(t, filepath.Join(t.TempDir(), "syncd.db"), nil)
		ctx := context.Background()
		commit := func(i int) {
			c := &IndexChange{}
			for j := i; j < i+batch; j++ {
				c.Put = append(c.Put, ent(uuidOf(j), j, 0))
			}
			must(t, b.Commit(ctx, "f", Commit{BatchID: fmt.Sprint(i), Window: Interval{at(i), at(i + batch)}, Rows: batch, Index: c}))
		}
		for i := 0; i < history; i += batch {
			commit(i)
		}
		before := b.db.Stats().TxStats
		commit(history)
		after := b.db.Stats().TxStats
		// Records in the chunks the last commit wrote, from the plan of a
		// commit like it.
		var starts []int64
		must(t, b.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(indexBucket).Bucket([]byte("f")).ForEach(func(k, _ []byte) error {
				starts = append(starts, keyTime(k))
				return nil
			})
		}))
		c := &IndexChange{}
		for j := history + batch; j < history+2*batch; j++ {
			c.Put = append(c.Put, ent(uuidOf(j), j, 0))
		}
		plan, err := planIndex(starts, func(start int64) ([]entry, error) {
			var es []entry
			err := b.db.View(func(tx *bolt.Tx) error {
				var err error
				es, err = decodeChunk(tx.Bucket(indexBucket).Bucket([]byte("f")).Get(chunkKey(start)))
				return err
			})
			return es, err
		}, nil, c, b.chunks)
		must(t, err)
		for _, es := range plan.write {
			rewritten += len(es)
		}
		return after.GetWrite() - before.GetWrite(), rewritten
	}
	smallPages, smallRows := written(10_000)
	bigPages, bigRows := written(100_000)
	t.Logf("a commit of %d records: %d pages written after 10k indexed records, %d after 100k; %d and %d records rewritten", batch, smallPages, bigPages, smallRows, bigRows)
	if bigRows > batch+boltChunkSmall || smallRows > batch+boltChunkSmall {
		t.Errorf("a commit of %d records rewrites %d (after 10k) and %d (after 100k) index records", batch, smallRows, bigRows)
	}
	if bigPages > smallPages+4 {
		t.Errorf("a commit writes %d pages after 100k indexed records, %d after 10k: it grows with the history", bigPages, smallPages)
	}
}

// TestMigrateFormat2Fixture opens a format 2 state file written by the
// syncd before format 3 (testdata/format2.db): the first writer moves each
// form's version index and each intent's versions out of the records,
// losing nothing.
func TestMigrateFormat2Fixture(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "syncd.db")
	raw, err := os.ReadFile("testdata/format2.db")
	must(t, err)
	must(t, os.WriteFile(path, raw, 0o600))
	legacy := fixtureLegacy(t)

	r := openR(t, path)
	if r.version != 2 {
		t.Fatalf("the fixture reads as version %d", r.version)
	}
	if a, err := r.Get(ctx, "form-a"); err != nil || a.Indexed != 41 {
		t.Errorf("a reader of the format 2 file counts %d indexed records (%v), want 41", a.Indexed, err)
	}
	must(t, r.Close())
	w := openW(t, path, nil)
	if w.version != 3 {
		t.Fatalf("the writer left the file at version %d", w.version)
	}
	checkMigrated(t, w, legacy)
	// Records no longer carry the index.
	must(t, w.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(formsBucket).ForEach(func(k, v []byte) error {
			if bytes.Contains(v, []byte(`"versions"`)) || bytes.Contains(v, []byte(`"gone"`)) {
				t.Errorf("record %s still holds versions: %s", k, v)
			}
			return nil
		})
	}))
	must(t, w.Close())
	// A reader of the migrated file sees the same, and so does a reader of
	// its backup: the index is in the file.
	checkMigrated(t, openR(t, path), nil)
	var buf bytes.Buffer
	_, err = BackupBolt(ctx, path, &buf)
	must(t, err)
	backup := filepath.Join(t.TempDir(), "backup.db")
	must(t, os.WriteFile(backup, buf.Bytes(), 0o600))
	checkMigrated(t, openR(t, backup), nil)
}

// fixtureLegacy is the index the fixtures hold, as format 2 kept it.
func fixtureLegacy(t *testing.T) map[string]*legacyIndex {
	t.Helper()
	raw, err := os.ReadFile("testdata/object-format1.json")
	must(t, err)
	var doc struct {
		Forms map[string]*legacyIndex `json:"forms"`
	}
	must(t, json.Unmarshal(raw, &doc))
	if n := len(doc.Forms["form-a"].Versions); n != 41 {
		t.Fatalf("the fixture's form-a has %d versions", n)
	}
	return doc.Forms
}

// checkMigrated checks the fixtures' state after the migration: form-a's
// index is its 41 versions and its open reconcile batch commits with the
// versions its intent carried; form-b and the secret are as they were.
// With legacy nil it checks what the commit left.
func checkMigrated(t *testing.T, st Store, legacy map[string]*legacyIndex) {
	t.Helper()
	ctx := context.Background()
	a, err := st.Get(ctx, "form-a")
	must(t, err)
	open := 0
	if legacy != nil {
		open = 1
	}
	if a.IndexedFrom.IsZero() || len(a.Intents) != open || a.Rows != 41 || len(a.Schema) == 0 {
		t.Fatalf("form-a after the migration: %+v", a)
	}
	if sec, err := st.GetSecret(ctx, "scheduling/refresh_token"); err != nil || string(sec) != "tok" {
		t.Errorf("secret after the migration: %q, %v", sec, err)
	}
	if b, err := st.Get(ctx, "form-b"); err != nil || len(b.Committed) != 1 || b.Indexed != 0 {
		t.Errorf("form-b after the migration: %+v, %v", b, err)
	}
	got := readIndex(t, st, "form-a", time.Unix(0, 0), time.Now().AddDate(10, 0, 0))
	if legacy == nil {
		if len(got) != 41 || a.Indexed != 41 {
			t.Errorf("form-a holds %d records (Indexed %d), want 41", len(got), a.Indexed)
		}
		return
	}
	want := map[string]Version{}
	for id, v := range legacy["form-a"].Versions {
		want[id] = v.entry(id).Version
	}
	if !maps.Equal(got, want) || a.Indexed != 41 {
		t.Fatalf("form-a's index after the migration: %d records (Indexed %d), want the fixture's 41", len(got), a.Indexed)
	}
	if c := a.Intents["b1-r1"].Counts; c == nil || *c != (ReconcileCounts{Versions: 2, Tombstones: 1}) {
		t.Errorf("the open reconcile batch's counts after the migration: %+v", c)
	}
	// The open reconcile batch commits with what its intent carried.
	must(t, st.Commit(ctx, "form-a", Commit{BatchID: "b1-r1", Window: a.Committed[0], Reconcile: &ReconcileCounts{Versions: 2, Tombstones: 1}}))
	pend := legacy["form-a"].Intents["b1-r1"]
	for id, v := range pend.Versions {
		want[id] = v.entry(id).Version
	}
	for _, id := range pend.Gone {
		delete(want, id)
	}
	got = readIndex(t, st, "form-a", time.Unix(0, 0), time.Now().AddDate(10, 0, 0))
	if !maps.Equal(got, want) {
		t.Fatalf("form-a's index after its open batch committed: %d records, want %d", len(got), len(want))
	}
}

// TestMigrateObjectFormat1Fixture: a state object of format 1 (with each
// form's index in its record) is migrated by the first writer: the index
// moves into chunk objects, the intents' versions into pending objects.
func TestMigrateObjectFormat1Fixture(t *testing.T) {
	legacy := fixtureLegacy(t)
	raw, err := os.ReadFile("testdata/object-format1.json")
	must(t, err)
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		seed := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false)
		must(t, seed.bucket.WriteAll(ctx, seed.key, raw, nil))
		// A reader reads the format 1 index where it is.
		r := openT(t, ObjectOptions{URL: url, ReadOnly: true}, false)
		if n := len(readIndex(t, r, "form-a", time.Unix(0, 0), time.Now().AddDate(10, 0, 0))); n != 41 {
			t.Fatalf("a reader of the format 1 object reads %d records", n)
		}
		w := openT(t, ObjectOptions{URL: url}, true)
		if w.doc.FormatVersion != objectFormat || len(w.doc.Index["form-a"].Chunks) == 0 || len(w.doc.Index["form-a"].Pending) != 1 {
			t.Fatalf("after the migration: format %d, index %+v", w.doc.FormatVersion, w.doc.Index)
		}
		checkMigrated(t, w, legacy)
		if len(w.doc.Index["form-a"].Pending) != 0 {
			t.Errorf("the pending object is still named after its commit")
		}
	})
}

// TestObjectBackupCarriesTheIndex: a backup of a state in a bucket holds
// its index objects, and a restore writes them back.
func TestObjectBackupCarriesTheIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		o := openT(t, ObjectOptions{URL: url}, true)
		o.chunks = chunkLimits{max: 4, small: 2}
		must(t, o.Commit(ctx, "f", Commit{BatchID: "b", Window: Interval{at(0), at(10)}, Index: &IndexChange{Put: entries(0, 10, 0)}}))
		must(t, o.RecordIntent(ctx, "f", Intent{BatchID: "p", Table: "t", Start: at(10), End: at(20), Index: &IndexChange{Put: entries(10, 12, 0)}}))
		var buf bytes.Buffer
		_, err := BackupObject(ctx, url, &buf)
		must(t, err)
		must(t, o.Reset(ctx, "f"))
		must(t, o.Close())
		_, err = RestoreObject(ctx, ObjectOptions{URL: url}, buf.Bytes())
		must(t, err)
		w := openT(t, ObjectOptions{URL: url}, true)
		if n := len(readIndex(t, w, "f", at(0), at(100))); n != 10 {
			t.Fatalf("after the restore the index holds %d records, want 10", n)
		}
		must(t, w.Commit(ctx, "f", Commit{BatchID: "p", Window: Interval{at(10), at(20)}}))
		if n := len(readIndex(t, w, "f", at(0), at(100))); n != 12 {
			t.Fatalf("the restored intent committed %d records, want 12", n)
		}
	})
}

// BenchmarkIndexBytesPerRecord commits 100,000 records of a dense form
// (UUID ids, 30 days, batches of 5,000) to a state file and reports what
// the index costs on disk: the chunks' bytes and the file's growth per
// record. b.N repeats the whole load.
func BenchmarkIndexBytesPerRecord(b *testing.B) {
	const records, batch = 100_000, 5_000
	step := 30 * 24 * time.Hour / records
	for i := 0; i < b.N; i++ {
		path := filepath.Join(b.TempDir(), "syncd.db")
		st, err := OpenBolt(context.Background(), BoltOptions{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		info, _ := os.Stat(path)
		empty := info.Size()
		for j := 0; j < records; j += batch {
			c := &IndexChange{}
			for k := j; k < j+batch; k++ {
				t := it0.Add(time.Duration(k) * step)
				c.Put = append(c.Put, Entry{ID: uuidOf(k), Version: Version{Time: t, Hash: TimeVersion(t)}})
			}
			w := Interval{Start: it0.Add(time.Duration(j) * step), End: it0.Add(time.Duration(j+batch) * step)}
			if err := st.RecordIntent(context.Background(), "f", Intent{BatchID: fmt.Sprint(j), Table: "t", Start: w.Start, End: w.End}); err != nil {
				b.Fatal(err)
			}
			if err := st.Commit(context.Background(), "f", Commit{BatchID: fmt.Sprint(j), Window: w, Index: c}); err != nil {
				b.Fatal(err)
			}
		}
		var chunkBytes, used int64
		if err := st.db.View(func(tx *bolt.Tx) error {
			// Pages in use: the file's high-water mark less its free pages.
			used = tx.Size() - int64(st.db.Stats().FreePageN+st.db.Stats().PendingPageN)*int64(st.db.Info().PageSize)
			return tx.Bucket(indexBucket).Bucket([]byte("f")).ForEach(func(k, v []byte) error {
				chunkBytes += int64(len(k) + len(v))
				return nil
			})
		}); err != nil {
			b.Fatal(err)
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		info, _ = os.Stat(path)
		b.ReportMetric(float64(chunkBytes)/records, "chunk-bytes/record")
		b.ReportMetric(float64(used-empty)/records, "page-bytes/record")
		b.ReportMetric(float64(info.Size()-empty)/records, "file-bytes/record")
	}
}

// BenchmarkObjectIndexSize commits 1,000,000 records of a dense form
// (batches of 10,000, as a backfill does) to a state in a bucket
// (fake-gcs-server) and reports the size of the state object and of the
// index objects, and the bytes one commit uploads at the end.
func BenchmarkObjectIndexSize(b *testing.B) {
	const records, batch = 1_000_000, 10_000
	step := 30 * 24 * time.Hour / records
	for i := 0; i < b.N; i++ {
		url := lakes.Start(b, "gs").URL(fmt.Sprintf("bench%d/syncd-state", i))
		ctx := context.Background()
		o, err := openObject(ctx, ObjectOptions{URL: url}, true)
		if err != nil {
			b.Fatal(err)
		}
		var lastUpload int64
		for j := 0; j < records; j += batch {
			c := &IndexChange{}
			for k := j; k < j+batch; k++ {
				t := it0.Add(time.Duration(k) * step)
				c.Put = append(c.Put, Entry{ID: uuidOf(k), Version: Version{Time: t, Hash: TimeVersion(t)}})
			}
			w := Interval{Start: it0.Add(time.Duration(j) * step), End: it0.Add(time.Duration(j+batch) * step)}
			if err := o.RecordIntent(ctx, "f", Intent{BatchID: fmt.Sprint(j), Table: "t", Start: w.Start, End: w.End}); err != nil {
				b.Fatal(err)
			}
			before := o.doc.Index["f"].clone()
			if err := o.Commit(ctx, "f", Commit{BatchID: fmt.Sprint(j), Window: w, Index: c}); err != nil {
				b.Fatal(err)
			}
			// Uploaded by the commit: the chunks it names anew and the
			// state object.
			old := map[string]bool{}
			for _, r := range before.Chunks {
				old[r.Name] = true
			}
			raw, _ := encodeDoc(&o.doc)
			lastUpload = int64(len(raw))
			for _, r := range o.doc.Index["f"].Chunks {
				if !old[r.Name] {
					attrs, err := o.bucket.Attributes(ctx, o.blobKey(r.Name))
					if err != nil {
						b.Fatal(err)
					}
					lastUpload += attrs.Size
				}
			}
		}
		var chunkBytes int64
		for _, r := range o.doc.Index["f"].Chunks {
			attrs, err := o.bucket.Attributes(ctx, o.blobKey(r.Name))
			if err != nil {
				b.Fatal(err)
			}
			chunkBytes += attrs.Size
		}
		raw, err := encodeDoc(&o.doc)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(raw)), "state-object-bytes")
		b.ReportMetric(float64(len(o.doc.Index["f"].Chunks)), "chunk-objects")
		b.ReportMetric(float64(chunkBytes)/records, "chunk-bytes/record")
		b.ReportMetric(float64(lastUpload), "last-commit-upload-bytes")
		if err := o.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestIndexMatchesAModel commits random batches (new records, edits, late
// imports before and between chunks, deletions) with tiny chunks and checks
// the index, whole and by range, against a map after each.
func TestIndexMatchesAModel(t *testing.T) {
	indexStores(t, chunkLimits{max: 5, small: 3}, func(t *testing.T, st Store) {
		ctx := context.Background()
		rng := rand.New(rand.NewPCG(7, 9))
		model := map[string]Version{}
		next := 0
		for step := 0; step < 60; step++ {
			c := &IndexChange{}
			for n := rng.IntN(12); n > 0; n-- {
				switch op := rng.IntN(4); {
				case op < 2 || len(model) == 0: // a new record, anywhere in time
					e := ent(uuidOf(next), rng.IntN(400)-100, 0)
					next++
					c.Put = append(c.Put, e)
				case op == 2: // an edit
					for id, v := range model {
						c.Put = append(c.Put, Entry{ID: id, Version: Version{Time: v.Time, Hash: rng.Uint64()}})
						break
					}
				default: // a deletion
					for id, v := range model {
						c.Gone = append(c.Gone, Entry{ID: id, Version: v})
						break
					}
				}
			}
			gone := map[string]bool{}
			for _, e := range c.Gone {
				gone[e.ID] = true
			}
			c.Put = slices.DeleteFunc(c.Put, func(e Entry) bool { return gone[e.ID] })
			must(t, commitBatch(ctx, st, fmt.Sprint("b", step), Interval{at(-100), at(300)}, c))
			for _, e := range c.Put {
				model[e.ID] = e.Version
			}
			for id := range gone {
				delete(model, id)
			}
			if got := readIndex(t, st, "f", at(-1000), at(1000)); !maps.Equal(got, model) {
				t.Fatalf("step %d: the index holds %d records, the model %d", step, len(got), len(model))
			}
			lo, hi := rng.IntN(400)-100, rng.IntN(400)-100
			got := readIndex(t, st, "f", at(min(lo, hi)), at(max(lo, hi)))
			want := maps.Collect(func(yield func(string, Version) bool) {
				for id, v := range model {
					if !v.Time.Before(at(min(lo, hi))) && v.Time.Before(at(max(lo, hi))) && !yield(id, v) {
						return
					}
				}
			})
			if !maps.Equal(got, want) {
				t.Fatalf("step %d: range [%d, %d) holds %d records, want %d", step, min(lo, hi), max(lo, hi), len(got), len(want))
			}
			if fs, err := st.Get(ctx, "f"); err != nil || fs.Indexed != int64(len(model)) {
				t.Fatalf("step %d: Indexed %d, want %d (%v)", step, fs.Indexed, len(model), err)
			}
		}
	})
}

// TestBackupRefusesADamagedIndex: a chunk of the index that fails its
// checksum makes the backup fail, naming the form.
func TestBackupRefusesADamagedIndex(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "syncd.db")
	w := openW(t, path, nil)
	must(t, commitBatch(ctx, w, "b", Interval{at(0), at(10)}, &IndexChange{Put: entries(0, 10, 0)}))
	must(t, w.Close())
	var buf bytes.Buffer
	if _, err := BackupBolt(ctx, path, &buf); err != nil {
		t.Fatalf("backup of a whole index: %v", err)
	}
	rewrite(t, path, func(tx *bolt.Tx) error {
		bk := tx.Bucket(indexBucket).Bucket([]byte("f"))
		k, v := bk.Cursor().First()
		bad := bytes.Clone(v)
		bad[len(bad)-1] ^= 1
		return bk.Put(bytes.Clone(k), bad)
	})
	_, err := BackupBolt(ctx, path, &buf)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Form != "f" {
		t.Fatalf("backup of a damaged index: %v, want a CorruptError naming form f", err)
	}
}

// TestObjectVersionsWhileACommitReplacesChunks: a commit during a Versions
// of the same store replaces chunks it still has to read; they are deleted
// only once it is done, so it reads what it began with.
func TestObjectVersionsWhileACommitReplacesChunks(t *testing.T) {
	eachStore(t, func(t *testing.T, url string) {
		ctx := context.Background()
		o := openT(t, ObjectOptions{URL: url}, true)
		o.chunks = chunkLimits{max: 2, small: 1}
		must(t, commitBatch(ctx, o, "b", Interval{at(0), at(10)}, &IndexChange{Put: entries(0, 10, 0)}))
		first := o.doc.Index["f"].Chunks
		n := 0
		err := o.Versions(ctx, "f", at(0), at(10), func(e Entry) error {
			if n++; n == 1 {
				// Every chunk gets a new version: all are replaced.
				c := &IndexChange{}
				for i := 0; i < 10; i++ {
					c.Put = append(c.Put, ent(uuidOf(i), i, 1))
				}
				return commitBatch(ctx, o, "r", Interval{at(0), at(10)}, c)
			}
			return nil
		})
		if err != nil || n != 10 {
			t.Fatalf("Versions read %d records: %v", n, err)
		}
		for _, c := range first {
			if _, err := o.bucket.Attributes(ctx, o.blobKey(c.Name)); err == nil {
				t.Errorf("chunk %s, replaced, is still in the bucket", c.Name)
			}
		}
		if got := readIndex(t, o, "f", at(0), at(10)); got[uuidOf(3)].Hash != TimeVersion(at(1001)) {
			t.Errorf("after the commit the index holds %v", got[uuidOf(3)])
		}
	})
}
