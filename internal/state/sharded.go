package state

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
	"github.com/syncd-dev/syncd/internal/table"
)

// ShardedOptions configures OpenSharded.
type ShardedOptions struct {
	// URL names the default account's state object, as ObjectOptions.URL;
	// every other account's lies beside it (see Sharded).
	URL string
	// ReadOnly reads and claims nothing: every write and every Claim fails
	// with ErrReadOnly.
	ReadOnly bool
	// LeaseTTL is the lease of each claimed account, as
	// ObjectOptions.LeaseTTL. Zero means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Now is the clock of the leases and the state's timestamps; nil means
	// time.Now.
	Now func() time.Time
}

// Sharded is a Store over state in a bucket kept per account (namespace),
// so that several syncd processes can share one bucket, each writing the
// accounts it claimed: an account's streams share one API key, whose
// request rate one process must hold.
//
// Each namespace is a state Object of its own. The default namespace ("")
// lives in the object URL names, where a single-account syncd keeps its
// state; namespace NS lives in <URL>.accounts/NS, with its own .lease and
// .index/ beside it. A key's namespace is table.SplitStreamKey's, for
// streams and secrets alike.
//
// OpenSharded takes no lease: Claim takes one namespace's, and only a
// claimed namespace can be written (a *NotClaimedError otherwise). Reads of
// a namespace this store has not claimed read its object afresh on every
// call, so they see what its owner last committed, never a stale copy.
//
// It is safe for concurrent use.
type Sharded struct {
	Streams

	bucket   *blob.Bucket
	key      string // of the default namespace's object
	shown    string // its URL
	readOnly bool
	ttl      time.Duration
	now      func() time.Time

	// claimMu serialises Claim, Release and Close, which go to the bucket;
	// mu guards owned and closed, and is never held across a bucket call.
	claimMu sync.Mutex
	mu      sync.Mutex
	owned   map[string]*claim
	closed  bool
}

var (
	_ Store   = (*Sharded)(nil)
	_ backend = (*Sharded)(nil)
)

// claim is a namespace this store holds the lease of.
type claim struct {
	obj      *Object
	lost     chan struct{} // closed once the lease is lost, or released
	released chan struct{} // closed by release
}

func newClaim(o *Object) *claim {
	c := &claim{obj: o, lost: make(chan struct{}), released: make(chan struct{})}
	go func() {
		defer close(c.lost)
		select {
		case <-o.Lost():
		case <-c.released:
		}
	}()
	return c
}

func (c *claim) isLost() bool {
	select {
	case <-c.lost:
		return true
	default:
		return false
	}
}

// release lets go of the lease: the next claimer need not wait for it to
// expire.
func (c *claim) release() error {
	close(c.released)
	<-c.lost
	return c.obj.Close()
}

// accountsDir is what follows the default namespace's key to make the
// prefix of every other namespace's object.
const accountsDir = ".accounts/"

// fenceTries bounds the fencing writes of a Claim that keep meeting a write
// of a previous holder that has not noticed it lost the lease.
const fenceTries = 5

// OpenSharded opens the bucket of the state at opts.URL. It reads nothing
// and takes no lease: Claim does, per namespace.
func OpenSharded(ctx context.Context, opts ShardedOptions) (*Sharded, error) {
	loc, err := parseStateURL(opts.URL)
	if err != nil {
		return nil, err
	}
	b, err := blobstore.Open(ctx, loc, false)
	if err != nil {
		return nil, fmt.Errorf("open state: %w", err)
	}
	s := &Sharded{bucket: b, key: loc.Prefix, shown: opts.URL, readOnly: opts.ReadOnly, ttl: opts.LeaseTTL, now: opts.Now, owned: map[string]*claim{}}
	if s.now == nil {
		s.now = time.Now
	}
	s.Streams = newStreams(s, s.now)
	return s, nil
}

// NotClaimedError is a write to a namespace this store has not claimed:
// only the process holding that namespace's lease may write its state.
type NotClaimedError struct {
	Namespace string // "" is the default account
	URL       string // the namespace's state object
	// Holder is the process whose lease on the namespace was live when the
	// write was refused; nil when none was (or it is unknown).
	Holder *Holder
}

func (e *NotClaimedError) Error() string {
	who := "no syncd holds its lease now"
	if e.Holder != nil {
		who = "its lease is held by " + e.Holder.String()
	}
	return fmt.Sprintf("%s is not claimed by this syncd, which therefore cannot write its state %s: only the syncd holding the lease of %s writes it (%s); claim it first", accountName(e.Namespace), e.URL, accountName(e.Namespace), who)
}

func accountName(ns string) string {
	if ns == "" {
		return "the default account"
	}
	return "account " + ns
}

// validNamespace reports whether ns can name an account's object:
// [a-z0-9][a-z0-9_-]*, as the configuration allows.
func validNamespace(ns string) bool {
	if ns == "" {
		return false
	}
	for i := 0; i < len(ns); i++ {
		c := ns[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// namespaceOf is the namespace of a stream key or a secret's name.
func namespaceOf(key string) (string, error) {
	ns, _ := table.SplitStreamKey(key)
	if ns != "" && !validNamespace(ns) {
		return "", fmt.Errorf("%q names account %q, which is not an account name ([a-z0-9][a-z0-9_-]*)", key, ns)
	}
	return ns, nil
}

// keyOf is the key of ns's object.
func (s *Sharded) keyOf(ns string) string {
	if ns == "" {
		return s.key
	}
	return s.key + accountsDir + ns
}

// shownOf is the URL of ns's object, for messages.
func (s *Sharded) shownOf(ns string) string {
	if ns == "" {
		return s.shown
	}
	base, query, ok := strings.Cut(s.shown, "?")
	if ok {
		return base + accountsDir + ns + "?" + query
	}
	return base + accountsDir + ns
}

// Claim takes the lease of namespace ns ("" is the default account) and
// fences its object: it writes it once, so that a previous holder whose
// lease ran out can commit nothing more, even while it believes its lease
// runs. A lease held by a live process gives a *LockedError naming it.
// Claiming a namespace this store holds does nothing; one whose lease was
// lost is claimed anew.
//
// The first claim of a named namespace whose object does not exist yet
// creates it with the namespace's records and secrets that the default
// account's object holds (state written before namespaces had objects of
// their own). A claim of the default namespace drops from its object the
// records and secrets of every namespace whose object exists.
func (s *Sharded) Claim(ctx context.Context, ns string) error {
	if ns != "" && !validNamespace(ns) {
		return fmt.Errorf("claim account %q: not an account name ([a-z0-9][a-z0-9_-]*)", ns)
	}
	if s.readOnly {
		return fmt.Errorf("claim %s: %w", accountName(ns), ErrReadOnly)
	}
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	c, closed := s.owned[ns], s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("claim %s: the state store is closed", accountName(ns))
	}
	if c != nil {
		if !c.isLost() {
			return nil
		}
		s.mu.Lock()
		delete(s.owned, ns)
		s.mu.Unlock()
		_ = c.release() // its lease is gone already: nothing to let go of
	}
	o, err := openObjectIn(ctx, s.bucket, s.keyOf(ns), ObjectOptions{URL: s.shownOf(ns), LeaseTTL: s.ttl, Now: s.now, sharded: true}, true)
	if err != nil {
		return fmt.Errorf("claim %s: %w", accountName(ns), err)
	}
	if ns != "" {
		if err := s.checkUnsharded(ctx); err != nil {
			o.Close()
			return fmt.Errorf("claim %s: %w", accountName(ns), err)
		}
	}
	if err := s.fence(ctx, ns, o); err != nil {
		o.Close()
		return fmt.Errorf("claim %s: fence its state %s: %w", accountName(ns), o.shown, err)
	}
	s.mu.Lock()
	s.owned[ns] = newClaim(o)
	s.mu.Unlock()
	return nil
}

// checkUnsharded refuses while a syncd of the build before Sharded holds
// the default object's lease: that one writes every account into the
// default object, so a named account claimed beside it would be synced
// twice (as in a rolling update, while the old pod still runs).
func (s *Sharded) checkUnsharded(ctx context.Context) error {
	cfg := leaseConfig{bucket: s.bucket, key: s.key + ".lease", shown: s.shown, now: s.now}
	rec, ver, err := readLease(ctx, cfg)
	if err != nil {
		return err
	}
	if ver == "" || rec.ID == "" || rec.Sharded || !s.now().Before(rec.Expires) {
		return nil
	}
	return fmt.Errorf("the state is held by a syncd that keeps every account in one object, and writes this one there too: %w", heldError(cfg, rec))
}

// fence writes ns's object, just claimed, once: with the namespace's
// records moved in from the default object when the object is new, or
// without the moved records when ns is the default namespace.
func (s *Sharded) fence(ctx context.Context, ns string, o *Object) error {
	var migrated map[string]bool
	if ns == "" {
		names, err := s.listNamespaces(ctx)
		if err != nil {
			return err
		}
		migrated = map[string]bool{}
		for _, n := range names {
			migrated[n] = true
		}
	}
	for try := 1; ; try++ {
		var edit func(doc *objectDoc) error
		var unused []string
		switch {
		case ns == "":
			edit = func(doc *objectDoc) error {
				unused = dropMigrated(doc, migrated)
				return nil
			}
		case !o.exists():
			var err error
			if edit, err = s.migration(ctx, o, ns); err != nil {
				return err
			}
		}
		err := o.fence(ctx, edit)
		if err == nil {
			o.remove(ctx, unused)
			return nil
		}
		var ce *ConflictError
		if !errors.As(err, &ce) || try == fenceTries {
			return err
		}
	}
}

// dropMigrated removes from the default object's doc the records, index
// and secrets of the namespaces in migrated, whose own objects hold them
// now, and returns the index objects it no longer names.
func dropMigrated(doc *objectDoc, migrated map[string]bool) (unused []string) {
	for id := range doc.Forms {
		if ns, _ := table.SplitStreamKey(id); ns == "" || !migrated[ns] {
			continue
		}
		delete(doc.Forms, id)
		delete(doc.Checksums, id)
		delete(doc.damaged, id)
		if ix, ok := doc.Index[id]; ok {
			for _, c := range ix.Chunks {
				unused = append(unused, c.Name)
			}
			unused = slices.AppendSeq(unused, maps.Values(ix.Pending))
			delete(doc.Index, id)
		}
	}
	for name := range doc.Secrets {
		if ns, _ := table.SplitStreamKey(name); ns != "" && migrated[ns] {
			delete(doc.Secrets, name)
		}
	}
	return unused
}

// migration reads what the default object holds of namespace ns, copies
// the index objects its records name to o's, and returns the edit that
// puts its records and secrets into o's document.
func (s *Sharded) migration(ctx context.Context, o *Object, ns string) (func(doc *objectDoc) error, error) {
	root := newObject(s.bucket, s.key, s.shown, true, s.now)
	if err := root.load(ctx); err != nil {
		return nil, fmt.Errorf("read what %s holds of %s: %w", s.shown, accountName(ns), err)
	}
	// root is this function's alone: no lock needed.
	from := root.doc
	var ids []string
	for id := range from.Forms {
		if n, _ := table.SplitStreamKey(id); n == ns {
			ids = append(ids, id)
		}
	}
	secrets := map[string][]byte{}
	for name, v := range from.Secrets {
		if n, _ := table.SplitStreamKey(name); n == ns {
			secrets[name] = v
		}
	}
	var legacy map[string]*legacyIndex
	if from.FormatVersion < 2 {
		// A format 1 object keeps the index in its records: the edit
		// writes it out as o's own chunk objects.
		legacy = map[string]*legacyIndex{}
		for _, id := range ids {
			if l := root.legacy[id]; l != nil {
				legacy[id] = l
			}
		}
	} else {
		for _, id := range ids {
			ix := from.Index[id]
			names := slices.Collect(maps.Values(ix.Pending))
			for _, c := range ix.Chunks {
				names = append(names, c.Name)
			}
			for _, name := range names {
				// Under the same name: a name is never reused, so a copy
				// left by an earlier attempt holds the same bytes.
				raw, err := root.getBlob(ctx, name)
				if err != nil {
					return nil, fmt.Errorf("copy the version index of %s: %w", id, err)
				}
				if err := o.bucket.WriteAll(ctx, o.blobKey(name), raw, &blob.WriterOptions{ContentType: "application/octet-stream"}); err != nil {
					return nil, fmt.Errorf("copy the version index of %s: write %s: %w", id, o.blobKey(name), blobstore.Hint(err, o.shown))
				}
			}
		}
	}
	return func(doc *objectDoc) error {
		for _, id := range ids {
			doc.Forms[id] = cloneForm(from.Forms[id])
			if err, bad := from.damaged[id]; bad {
				// Damaged stays damaged, with the checksum it failed.
				if doc.damaged == nil {
					doc.damaged = map[string]error{}
				}
				if doc.Checksums == nil {
					doc.Checksums = map[string]uint32{}
				}
				doc.damaged[id] = err
				doc.Checksums[id] = from.Checksums[id]
			}
			if ix, ok := from.Index[id]; ok && legacy == nil {
				doc.Index[id] = ix.clone()
			}
		}
		maps.Copy(doc.Secrets, secrets)
		if len(legacy) > 0 {
			if _, err := o.migrateDoc(ctx, doc, legacy); err != nil {
				return fmt.Errorf("move the version index of %s out of its records: %w", accountName(ns), err)
			}
		}
		return nil
	}, nil
}

// listNamespaces lists the namespaces whose objects exist in the bucket.
func (s *Sharded) listNamespaces(ctx context.Context) ([]string, error) {
	prefix := s.key + accountsDir
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix, Delimiter: "/"})
	var names []string
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list the accounts' state under %s: %w", s.shownOf("*"), blobstore.Hint(err, s.shown))
		}
		// NS, but not NS.lease nor NS.index/ (no namespace holds a dot).
		if ns := strings.TrimPrefix(obj.Key, prefix); !obj.IsDir && validNamespace(ns) {
			names = append(names, ns)
		}
	}
}

// Release lets go of namespace ns's lease, so that another process can
// claim it at once. The caller has ended the passes that write it. A
// namespace not claimed is released already.
func (s *Sharded) Release(ns string) error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	c := s.owned[ns]
	delete(s.owned, ns)
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	if err := c.release(); err != nil {
		return fmt.Errorf("release %s: %w", accountName(ns), err)
	}
	return nil
}

// Owned returns the namespaces this store holds the lease of, in order:
// claimed, not released, and not lost.
func (s *Sharded) Owned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for ns, c := range s.owned {
		if !c.isLost() {
			out = append(out, ns)
		}
	}
	sort.Strings(out)
	return out
}

// Lost is closed once this store's lease on namespace ns is lost to
// another process, has expired without renewal, or was released: from then
// on the namespace's writes fail, and a sink should abandon its uploads in
// flight. For a namespace not claimed it is closed already.
func (s *Sharded) Lost(ns string) <-chan struct{} {
	s.mu.Lock()
	c := s.owned[ns]
	s.mu.Unlock()
	if c == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return c.lost
}

// URL is the default namespace's state object's URL.
func (s *Sharded) URL() string { return s.shown }

// writer is the object of key's namespace, if this store claimed it.
func (s *Sharded) writer(ctx context.Context, key string) (*Object, error) {
	ns, err := namespaceOf(key)
	if err != nil {
		return nil, err
	}
	if s.readOnly {
		return nil, ErrReadOnly
	}
	s.mu.Lock()
	c := s.owned[ns]
	s.mu.Unlock()
	if c == nil {
		return nil, s.notClaimed(ctx, ns)
	}
	// Even when the lease is lost: the object's own error says how.
	return c.obj, nil
}

func (s *Sharded) notClaimed(ctx context.Context, ns string) error {
	e := &NotClaimedError{Namespace: ns, URL: s.shownOf(ns)}
	// Who holds it, if anyone: a courtesy, so a failed read is no error.
	rec, ver, err := readLease(ctx, leaseConfig{bucket: s.bucket, key: s.keyOf(ns) + ".lease", shown: e.URL})
	if err == nil && ver != "" && rec.ID != "" && s.now().Before(rec.Expires) {
		e.Holder = &Holder{PID: rec.PID, Host: rec.Host, Started: rec.Started}
	}
	return e
}

// claimed is ns's object when this store holds its lease.
func (s *Sharded) claimed(ns string) *Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.owned[ns]; c != nil && !c.isLost() {
		return c.obj
	}
	return nil
}

// readObject reads the object of ns afresh, read-only.
func (s *Sharded) readObject(ctx context.Context, ns string) (*Object, error) {
	o := newObject(s.bucket, s.keyOf(ns), s.shownOf(ns), true, s.now)
	if err := o.load(ctx); err != nil {
		return nil, err
	}
	return o, nil
}

// rootView is the default namespace's object: this store's when claimed,
// else read afresh.
func (s *Sharded) rootView(ctx context.Context) (*Object, error) {
	if o := s.claimed(""); o != nil {
		return o, nil
	}
	return s.readObject(ctx, "")
}

// view is the object that holds what is true of key's namespace: this
// store's when claimed; else its object, read afresh; else, for a named
// namespace whose object does not exist yet, the default object, where
// the state written before namespaces had objects of their own lies.
func (s *Sharded) view(ctx context.Context, key string) (*Object, error) {
	ns, err := namespaceOf(key)
	if err != nil {
		return nil, err
	}
	if ns == "" {
		return s.rootView(ctx)
	}
	if o := s.claimed(ns); o != nil {
		return o, nil
	}
	o, err := s.readObject(ctx, ns)
	if err != nil || o.exists() {
		return o, err
	}
	root, err := s.rootView(ctx)
	if err != nil {
		return nil, err
	}
	// The namespace's first claim may have created its object and a claim
	// of the default one dropped the records from root since ns was read:
	// if ns is still absent now, root's records are its truth.
	if o, err = s.readObject(ctx, ns); err != nil || o.exists() {
		return o, err
	}
	return root, nil
}

// record returns the state of a form from its namespace's object.
func (s *Sharded) record(ctx context.Context, formID string) (StreamState, error) {
	o, err := s.view(ctx, formID)
	if err != nil {
		return StreamState{}, fmt.Errorf("read state of form %s: %w", formID, err)
	}
	return o.record(ctx, formID)
}

// update writes the form's record in its namespace's object, which this
// store must have claimed.
func (s *Sharded) update(ctx context.Context, formID string, overDamage bool, fn func(st *StreamState, ix indexTx) error) error {
	o, err := s.writer(ctx, formID)
	if err != nil {
		return err
	}
	return o.update(ctx, formID, overDamage, fn)
}

// records returns the state of every form of every namespace, by form id.
func (s *Sharded) records(ctx context.Context) ([]StreamState, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list form states: %w", err)
	}
	// The default object before the listing: a record dropped from it
	// lives in an object that existed before, which the listing then shows.
	root, err := s.rootView(ctx)
	if err != nil {
		return nil, fmt.Errorf("list form states: %w", err)
	}
	rootList, err := root.records(ctx)
	if err != nil {
		return nil, err
	}
	names, err := s.listNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("list form states: %w", err)
	}
	for _, ns := range s.Owned() {
		if ns != "" && !slices.Contains(names, ns) {
			names = append(names, ns)
		}
	}
	own := map[string]bool{}
	for _, ns := range names {
		own[ns] = true
	}
	var list []StreamState
	for _, st := range rootList {
		// A named namespace whose object exists is that object's alone.
		if ns, _ := table.SplitStreamKey(st.Key); ns == "" || !own[ns] {
			list = append(list, st)
		}
	}
	for _, ns := range names {
		o := s.claimed(ns)
		if o == nil {
			if o, err = s.readObject(ctx, ns); err != nil {
				return nil, fmt.Errorf("list form states: %w", err)
			}
		}
		l, err := o.records(ctx)
		if err != nil {
			return nil, err
		}
		for _, st := range l {
			if n, _ := table.SplitStreamKey(st.Key); n == ns {
				list = append(list, st)
			}
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	return list, nil
}

// versions reads the form's version index from its namespace's object.
// For a namespace another process owns, the chunks it reads may be
// replaced under it by that owner's writes: it then fails, and a retry
// reads the newer state.
func (s *Sharded) versions(ctx context.Context, formID string, from, to time.Time, fn func(Entry) error) error {
	o, err := s.view(ctx, formID)
	if err != nil {
		return fmt.Errorf("read the version index of form %s: %w", formID, err)
	}
	return o.versions(ctx, formID, from, to, fn)
}

// secret returns the value stored under name in its namespace.
func (s *Sharded) secret(ctx context.Context, name string) ([]byte, error) {
	o, err := s.view(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read secret %s: %w", name, err)
	}
	return o.secret(ctx, name)
}

// putSecret stores value under name in its namespace (nil deletes it).
func (s *Sharded) putSecret(ctx context.Context, name string, value []byte) error {
	o, err := s.writer(ctx, name)
	if err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	return o.putSecret(ctx, name, value)
}

// close releases every lease this store holds and closes the bucket.
// Calling it again returns nil.
func (s *Sharded) close() error {
	s.claimMu.Lock()
	defer s.claimMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	owned := s.owned
	s.owned = map[string]*claim{}
	s.mu.Unlock()
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(owned)) {
		if err := owned[ns].release(); err != nil {
			errs = append(errs, fmt.Errorf("release %s: %w", accountName(ns), err))
		}
	}
	errs = append(errs, s.bucket.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close state %s: %w", s.shown, err)
	}
	return nil
}
