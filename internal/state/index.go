package state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"slices"
	"time"

	"github.com/syncd-dev/syncd/internal/ids"
)

// The version index says, for every record the output holds, which version
// of it the output holds: a reconcile compares what a source lists now with
// it. It covers a stream's whole history, so it is kept apart from the
// stream's record (which every intent and commit rewrites), in chunks: each
// chunk holds the entries of one range of record times, sorted by time, and
// a commit rewrites only the chunks its batch's records fall in. A chunk is
// the range [its start, the next chunk's start).
//
// An entry is compact: the record's time (a varint of the microseconds since
// the previous entry), its id (16 bytes for a lowercase UUID, as the Forms
// API's ids are; the bytes of any other id) and a 64-bit hash of the version
// the output holds: about 29 bytes for a dense form.

// Version is what the index keeps of one record: its time (which window and
// partition it lies in) and a hash of the version the output holds.
type Version struct {
	Time time.Time
	Hash uint64
}

// TimeVersion is the hash of a version given as a time (a submission's
// lastUpdatedAt): the microseconds, hashed like any other version.
func TimeVersion(t time.Time) uint64 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMicro()))
	return HashVersion(b[:])
}

// HashVersion is the 64-bit hash (FNV-1a) the index keeps of a version.
func HashVersion(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Entry is one record of the index.
type Entry struct {
	ID string
	Version
}

// IndexChange is what one batch changes in the index: the versions it wrote
// and the records it tombstoned (their time says where they are). Of two
// puts of one record the later wins; a record in both is deleted.
type IndexChange struct {
	Put  []Entry
	Gone []Entry
}

func (c *IndexChange) empty() bool { return c == nil || len(c.Put)+len(c.Gone) == 0 }

// entry is an Entry as the chunks hold it.
type entry struct {
	t  int64 // record time, Unix microseconds
	id string
	h  uint64
}

func (e entry) compare(o entry) int {
	if c := cmp.Compare(e.t, o.t); c != 0 {
		return c
	}
	return cmp.Compare(e.id, o.id)
}

func toEntries(es []Entry) []entry {
	out := make([]entry, len(es))
	for i, e := range es {
		out[i] = entry{t: e.Time.UnixMicro(), id: e.ID, h: e.Hash}
	}
	return out
}

func (e entry) public() Entry {
	return Entry{ID: e.id, Version: Version{Time: time.UnixMicro(e.t).UTC(), Hash: e.h}}
}

// chunkEncoding is the layout of a chunk's bytes after its checksum.
const chunkEncoding = 1

// encodeChunk writes sorted entries: CRC-32C of the rest, the encoding, the
// count, then each entry.
func encodeChunk(es []entry) []byte {
	b := make([]byte, 4, 8+len(es)*30)
	b = append(b, chunkEncoding)
	b = binary.AppendUvarint(b, uint64(len(es)))
	var prev int64
	for i, e := range es {
		if i == 0 {
			b = binary.AppendVarint(b, e.t)
		} else {
			b = binary.AppendUvarint(b, uint64(e.t-prev))
		}
		prev = e.t
		b = appendID(b, e.id)
		b = binary.BigEndian.AppendUint64(b, e.h)
	}
	binary.BigEndian.PutUint32(b, crc32.Checksum(b[4:], castagnoli))
	return b
}

// decodeChunk reads what encodeChunk wrote, checking its checksum.
func decodeChunk(b []byte) ([]entry, error) {
	if len(b) < 6 {
		return nil, fmt.Errorf("an index chunk of %d bytes is too short", len(b))
	}
	if got, stored := crc32.Checksum(b[4:], castagnoli), binary.BigEndian.Uint32(b); got != stored {
		return nil, fmt.Errorf("an index chunk fails its checksum (stored %08x, computed %08x)", stored, got)
	}
	if b[4] != chunkEncoding {
		return nil, fmt.Errorf("an index chunk has encoding %d, not %d", b[4], chunkEncoding)
	}
	b = b[5:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("an index chunk has no valid count")
	}
	b = b[k:]
	es := make([]entry, 0, n)
	var prev int64
	for i := uint64(0); i < n; i++ {
		var t int64
		if i == 0 {
			v, k := binary.Varint(b)
			if k <= 0 {
				return nil, errors.New("an index chunk has a bad time")
			}
			t, b = v, b[k:]
		} else {
			d, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, errors.New("an index chunk has a bad time")
			}
			t, b = prev+int64(d), b[k:]
		}
		prev = t
		id, rest, err := readID(b)
		if err != nil {
			return nil, err
		}
		if len(rest) < 8 {
			return nil, errors.New("an index chunk ends inside an entry")
		}
		es = append(es, entry{t: t, id: id, h: binary.BigEndian.Uint64(rest)})
		b = rest[8:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("an index chunk has %d bytes after its last entry", len(b))
	}
	return es, nil
}

// appendID writes an id: 0 and 16 bytes for a lowercase UUID (the Forms
// API's ids), else its length plus one and its bytes.
func appendID(b []byte, id string) []byte {
	if u, ok := ids.PackUUID(id); ok {
		b = append(b, 0)
		return append(b, u[:]...)
	}
	b = binary.AppendUvarint(b, uint64(len(id))+1)
	return append(b, id...)
}

func readID(b []byte) (string, []byte, error) {
	tag, k := binary.Uvarint(b)
	if k <= 0 {
		return "", nil, errors.New("an index chunk has a bad id")
	}
	b = b[k:]
	if tag == 0 {
		if len(b) < 16 {
			return "", nil, errors.New("an index chunk ends inside an id")
		}
		return ids.UnpackUUID([16]byte(b[:16])), b[16:], nil
	}
	n := tag - 1
	if n > uint64(len(b)) {
		return "", nil, errors.New("an index chunk ends inside an id")
	}
	return string(b[:n]), b[n:], nil
}

// encodeChange writes an IndexChange (the pending versions of an intent):
// its puts and its deletions as two chunks, each with its length.
func encodeChange(c *IndexChange) []byte {
	put, gone := sortedEntries(c.Put), sortedEntries(c.Gone)
	a, b := encodeChunk(put), encodeChunk(gone)
	out := binary.AppendUvarint(nil, uint64(len(a)))
	out = append(out, a...)
	return append(out, b...)
}

func decodeChange(raw []byte) (*IndexChange, error) {
	n, k := binary.Uvarint(raw)
	if k <= 0 || n > uint64(len(raw)-k) {
		return nil, errors.New("the pending versions of a batch are damaged")
	}
	put, err := decodeChunk(raw[k : k+int(n)])
	if err != nil {
		return nil, fmt.Errorf("the pending versions of a batch: %w", err)
	}
	gone, err := decodeChunk(raw[k+int(n):])
	if err != nil {
		return nil, fmt.Errorf("the pending deletions of a batch: %w", err)
	}
	c := &IndexChange{Put: make([]Entry, len(put)), Gone: make([]Entry, len(gone))}
	for i, e := range put {
		c.Put[i] = e.public()
	}
	for i, e := range gone {
		c.Gone[i] = e.public()
	}
	return c, nil
}

// sortedEntries sorts es by time and id; of two entries of one record, the
// later in es wins.
func sortedEntries(es []Entry) []entry {
	in := toEntries(es)
	slices.SortStableFunc(in, entry.compare)
	out := in[:0]
	for _, e := range in {
		if n := len(out); n > 0 && out[n-1].compare(e) == 0 {
			out[n-1] = e
			continue
		}
		out = append(out, e)
	}
	return out
}

// chunkLimits sizes a store's chunks: at most max entries, and a chunk
// under small entries takes the entries after it instead of a new chunk
// being started. A commit therefore rewrites at most small entries it did
// not change, besides whole chunks its changes fall in.
type chunkLimits struct{ max, small int }

// indexPlan is what a commit does to a stream's chunks: the chunks to
// write (by start), those to delete, and the change in the entry count.
type indexPlan struct {
	write  map[int64][]entry
	delete []int64
	delta  int64
}

// planIndex works out how change c lands in the chunks whose starts are
// given (sorted), loading those it falls in with load. tail, unless nil,
// tells a chunk's count and last time without loading it.
func planIndex(starts []int64, load func(start int64) ([]entry, error), tail func(start int64) (int, int64), c *IndexChange, lim chunkLimits) (indexPlan, error) {
	plan := indexPlan{write: map[int64][]entry{}}
	if c.empty() {
		return plan, nil
	}
	put, gone := sortedEntries(c.Put), sortedEntries(c.Gone)
	first := int64(0)
	if len(starts) == 0 {
		// No chunk yet: every entry goes to the one starting at the first.
		first = slices.MinFunc(append(slices.Clip(put), gone...), entry.compare).t
	}
	// target is the start of the chunk an entry at t belongs to; an entry
	// before the first chunk goes to it, which then starts earlier.
	target := func(t int64) int64 {
		i, found := slices.BinarySearch(starts, t)
		if found {
			return starts[i]
		}
		if i == 0 {
			if len(starts) == 0 {
				return first
			}
			return starts[0]
		}
		return starts[i-1]
	}
	type group struct{ put, gone []entry }
	groups := map[int64]*group{}
	var order []int64
	add := func(e entry, isPut bool) {
		k := target(e.t)
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		if isPut {
			g.put = append(g.put, e)
		} else {
			g.gone = append(g.gone, e)
		}
	}
	for _, e := range put {
		add(e, true)
	}
	for _, e := range gone {
		add(e, false)
	}
	slices.Sort(order)
	for _, k := range order {
		g := groups[k]
		_, exists := slices.BinarySearch(starts, k)
		var old []entry
		n, last := 0, int64(0)
		if exists && tail != nil {
			n, last = tail(k)
		}
		if exists && (tail == nil || !appends(g.put, g.gone, n, last, lim)) {
			var err error
			if old, err = load(k); err != nil {
				return plan, err
			}
			if n = len(old); n > 0 {
				last = old[n-1].t
			}
		}
		// Appending after a chunk that is big enough: start a new one, so
		// the old chunk is not rewritten.
		if exists && appends(g.put, g.gone, n, last, lim) {
			plan.delta += int64(len(g.put))
			for _, p := range splitChunk(g.put, lim.max) {
				plan.write[p[0].t] = p
			}
			continue
		}
		merged, delta := mergeEntries(old, g.put, g.gone)
		plan.delta += delta
		start := k
		if len(merged) > 0 && merged[0].t < start {
			start = merged[0].t // entries before the first chunk
		}
		if exists && (start != k || len(merged) == 0) {
			plan.delete = append(plan.delete, k)
		}
		for i, p := range splitChunk(merged, lim.max) {
			s := p[0].t
			if i == 0 {
				s = start
			}
			plan.write[s] = p
		}
	}
	// A chunk written at a start also being deleted is a rewrite.
	plan.delete = slices.DeleteFunc(plan.delete, func(k int64) bool { _, w := plan.write[k]; return w })
	return plan, nil
}

// appends reports whether puts after a chunk of n records ending at last
// start a chunk of their own.
func appends(put, gone []entry, n int, last int64, lim chunkLimits) bool {
	return len(gone) == 0 && len(put) > 0 && n >= lim.small && put[0].t > last
}

// mergeEntries applies sorted puts and deletions to sorted entries and
// returns the result and the change in count. A put replaces the entry of
// the same time and id; a deletion of an entry not there is nothing.
func mergeEntries(old, put, gone []entry) ([]entry, int64) {
	out := make([]entry, 0, len(old)+len(put))
	i, j := 0, 0
	for i < len(old) || j < len(put) {
		switch {
		case j == len(put) || (i < len(old) && old[i].compare(put[j]) < 0):
			out = append(out, old[i])
			i++
		case i == len(old) || old[i].compare(put[j]) > 0:
			out = append(out, put[j])
			j++
		default:
			out = append(out, put[j])
			i++
			j++
		}
	}
	delta := int64(len(out) - len(old))
	if len(gone) > 0 {
		before := len(out)
		out = slices.DeleteFunc(out, func(e entry) bool {
			_, found := slices.BinarySearchFunc(gone, e, entry.compare)
			return found
		})
		delta -= int64(before - len(out))
	}
	return out, delta
}

// splitChunk cuts sorted entries into pieces of at most max entries, of
// even size, each starting at a new time (entries of one instant stay in
// one chunk, however many they are).
func splitChunk(es []entry, max int) [][]entry {
	if len(es) == 0 {
		return nil
	}
	n := (len(es) + max - 1) / max
	size := (len(es) + n - 1) / n
	var out [][]entry
	for len(es) > 0 {
		cut := min(size, len(es))
		for cut < len(es) && es[cut].t == es[cut-1].t {
			cut++
		}
		out = append(out, es[:cut])
		es = es[cut:]
	}
	return out
}

// chunkKey is a chunk's start as a key that sorts as the time does.
func chunkKey(t int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(t)^(1<<63))
}

func keyTime(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k) ^ (1 << 63))
}

// legacyVersion is a version as formats 1 and 2 kept it in the stream's
// record: two Unix microsecond numbers, the time and lastUpdatedAt.
type legacyVersion [2]int64

func (v legacyVersion) entry(id string) Entry {
	return Entry{ID: id, Version: Version{Time: time.UnixMicro(v[0]).UTC(), Hash: TimeVersion(time.UnixMicro(v[1]))}}
}

// legacyIndex is what a format 2 record held of the version index: in the
// record, and in each intent.
type legacyIndex struct {
	Versions map[string]legacyVersion `json:"versions"`
	Intents  map[string]struct {
		Versions map[string]legacyVersion `json:"versions"`
		Gone     []string                 `json:"gone"`
	} `json:"intents"`
}

// entries is the record's index, sorted.
func (l *legacyIndex) entries() []Entry {
	out := make([]Entry, 0, len(l.Versions))
	for id, v := range l.Versions {
		out = append(out, v.entry(id))
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// pending is the change an intent of a format 2 record carried. Its
// deletions were ids only: their times come from the record's index.
func (l *legacyIndex) pending(batchID string) *IndexChange {
	in, ok := l.Intents[batchID]
	if !ok || len(in.Versions)+len(in.Gone) == 0 {
		return nil
	}
	c := &IndexChange{}
	for id, v := range in.Versions {
		c.Put = append(c.Put, v.entry(id))
	}
	for _, id := range in.Gone {
		if v, ok := l.Versions[id]; ok {
			c.Gone = append(c.Gone, v.entry(id))
		}
	}
	return c
}

// counts are what an open reconcile batch of a format 2 record writes,
// which format 3 keeps in the intent (Intent.Counts).
func (l *legacyIndex) counts(batchID string) *ReconcileCounts {
	in := l.Intents[batchID]
	return &ReconcileCounts{Versions: len(in.Versions), Tombstones: len(in.Gone)}
}
