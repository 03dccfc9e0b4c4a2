package formsim

import (
	"slices"
	"sort"
)

// class is what the list endpoint's status and includePreview see.
type class uint8

const (
	classFinished   class = iota
	classPreview          // finished, hidden unless includePreview=true
	classInProgress       // listed only with status=in_progress
	numClasses
)

type classMask uint8

func (c class) in(m classMask) bool { return m&(1<<c) != 0 }

// rec is the whole per-submission footprint: everything else is generated
// from (seed, form, ord) when a page is served, or read from the overlay of
// created rows for ordinals past the generated ones.
type rec struct {
	t   int64  // submissionTime, Unix milliseconds
	ord uint32 // row identity within the form
	cls class
}

// cmpRec orders by (submissionTime, ord): ties on time are broken by a key
// that never changes, so offset paging is stable.
func cmpRec(a, b rec) int {
	switch {
	case a.t < b.t:
		return -1
	case a.t > b.t:
		return 1
	case a.ord < b.ord:
		return -1
	case a.ord > b.ord:
		return 1
	}
	return 0
}

// Blocks keep inserts and deletes O(block) instead of O(n), and their
// per-class counts let offset paging skip whole blocks: a page costs
// O(blocks + limit), not O(offset).
const (
	blockTarget = 1024
	blockMax    = 2 * blockTarget
)

type block struct {
	recs []rec
	n    [numClasses]int
}

func (b *block) count(m classMask) int {
	c := 0
	for cl := class(0); cl < numClasses; cl++ {
		if cl.in(m) {
			c += b.n[cl]
		}
	}
	return c
}

// index is a sorted sequence of recs split into blocks.
type index struct {
	blocks []*block
	n      [numClasses]int
}

// appendSorted adds r after every rec already held; callers building an
// index from sorted input use it to avoid a search per row.
func (x *index) appendSorted(r rec) {
	if len(x.blocks) == 0 || len(x.blocks[len(x.blocks)-1].recs) >= blockTarget {
		x.blocks = append(x.blocks, &block{recs: make([]rec, 0, blockTarget)})
	}
	b := x.blocks[len(x.blocks)-1]
	b.recs = append(b.recs, r)
	b.n[r.cls]++
	x.n[r.cls]++
}

func (x *index) count(m classMask) int {
	c := 0
	for cl := class(0); cl < numClasses; cl++ {
		if cl.in(m) {
			c += x.n[cl]
		}
	}
	return c
}

// seek returns the position of the first rec >= key: a block index and an
// offset within it (len(blocks), 0 when every rec is smaller).
func (x *index) seek(key rec) (int, int) {
	bi := sort.Search(len(x.blocks), func(i int) bool {
		b := x.blocks[i]
		return cmpRec(b.recs[len(b.recs)-1], key) >= 0
	})
	if bi == len(x.blocks) {
		return bi, 0
	}
	recs := x.blocks[bi].recs
	i, _ := slices.BinarySearchFunc(recs, key, cmpRec)
	return bi, i
}

// seekTime is seek for the first rec with t >= ms.
func (x *index) seekTime(ms int64) (int, int) { return x.seek(rec{t: ms}) }

// find returns the rec equal to key (same time and ordinal).
func (x *index) find(key rec) (rec, bool) {
	bi, i := x.seek(key)
	if bi == len(x.blocks) {
		return rec{}, false
	}
	r := x.blocks[bi].recs[i]
	return r, r.t == key.t && r.ord == key.ord
}

func (x *index) insert(r rec) {
	if len(x.blocks) == 0 {
		x.appendSorted(r)
		return
	}
	bi, i := x.seek(r)
	if bi == len(x.blocks) {
		bi = len(x.blocks) - 1
		i = len(x.blocks[bi].recs)
	}
	b := x.blocks[bi]
	b.recs = slices.Insert(b.recs, i, r)
	b.n[r.cls]++
	x.n[r.cls]++
	if len(b.recs) > blockMax {
		half := len(b.recs) / 2
		nb := &block{recs: make([]rec, len(b.recs)-half, blockTarget+blockTarget/2)}
		copy(nb.recs, b.recs[half:])
		b.recs = slices.Clip(b.recs[:half])
		b.n, nb.n = [numClasses]int{}, [numClasses]int{}
		for _, r := range b.recs {
			b.n[r.cls]++
		}
		for _, r := range nb.recs {
			nb.n[r.cls]++
		}
		x.blocks = slices.Insert(x.blocks, bi+1, nb)
	}
}

// remove deletes the rec equal to key and reports whether there was one.
func (x *index) remove(key rec) (rec, bool) {
	bi, i := x.seek(key)
	if bi == len(x.blocks) {
		return rec{}, false
	}
	b := x.blocks[bi]
	r := b.recs[i]
	if r.t != key.t || r.ord != key.ord {
		return rec{}, false
	}
	b.recs = slices.Delete(b.recs, i, i+1)
	b.n[r.cls]--
	x.n[r.cls]--
	if len(b.recs) == 0 {
		x.blocks = slices.Delete(x.blocks, bi, bi+1)
	}
	return r, true
}

// countRange counts the recs of classes m with t in [lo, hi).
func (x *index) countRange(m classMask, lo, hi int64) int {
	n := 0
	x.walk(m, lo, hi, 0, func(_ rec, whole *block) bool {
		if whole != nil {
			n += whole.count(m)
		} else {
			n++
		}
		return true
	}, true)
	return n
}

// page returns up to limit recs of classes m with t in [lo, hi), after
// skipping the first skip of them, in ascending order, appended to dst.
func (x *index) page(dst []rec, m classMask, lo, hi int64, skip, limit int) []rec {
	if limit <= 0 {
		return dst
	}
	n := 0
	x.walk(m, lo, hi, skip, func(r rec, _ *block) bool {
		dst = append(dst, r)
		n++
		return n < limit
	}, false)
	return dst
}

// walk visits, in order, the recs of classes m with t in [lo, hi), skipping
// the first skip of them; it stops when fn returns false. With wholeBlocks,
// a block lying entirely inside the range is passed as one call with whole
// set (for counting) instead of rec by rec.
func (x *index) walk(m classMask, lo, hi int64, skip int, fn func(r rec, whole *block) bool, wholeBlocks bool) {
	if lo >= hi {
		return
	}
	bi, i := x.seekTime(lo)
	for ; bi < len(x.blocks); bi, i = bi+1, 0 {
		b := x.blocks[bi]
		if b.recs[0].t >= hi {
			return
		}
		inside := i == 0 && b.recs[len(b.recs)-1].t < hi
		if inside {
			if c := b.count(m); skip >= c {
				skip -= c
				continue
			}
			if wholeBlocks && skip == 0 {
				if !fn(rec{}, b) {
					return
				}
				continue
			}
		}
		for ; i < len(b.recs); i++ {
			r := b.recs[i]
			if r.t >= hi {
				return
			}
			if !r.cls.in(m) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			if !fn(r, nil) {
				return
			}
		}
	}
}

// nth returns the k-th (0-based) rec of classes m over the whole index.
func (x *index) nth(m classMask, k int) (rec, bool) {
	var out rec
	found := false
	x.walk(m, minTime, maxTime, k, func(r rec, _ *block) bool {
		out, found = r, true
		return false
	}, false)
	return out, found
}

// The widest time range; real times are far inside it.
const (
	minTime = -1 << 62
	maxTime = 1 << 62
)
