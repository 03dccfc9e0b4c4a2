package state

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// leaseRecord is the lease object: who holds the state and until when, by
// the holder's clock.
type leaseRecord struct {
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
	// Sharded is set by a Sharded store: its holder owns only the
	// accounts the object holds now, not every account of the state.
	Sharded bool `json:"sharded,omitempty"`
}

type leaseConfig struct {
	bucket *blob.Bucket
	key    string
	shown  string // the state URL, for messages
	id     string
	ttl    time.Duration
	now    func() time.Time
	// sharded marks the lease record (leaseRecord.Sharded).
	sharded bool
}

// lease is a held lease object, renewed in the background every third of
// its TTL with compare-and-swap on its generation, so that a holder whose
// lease was taken over learns it at its next renewal.
type lease struct {
	cfg  leaseConfig
	rec  leaseRecord
	stop context.CancelFunc
	done chan struct{}

	mu      sync.Mutex
	ver     blobstore.Version
	expires time.Time
	lost    error // set when another syncd took the lease over

	gone     chan struct{} // closed once the lease is lost or expired
	goneOnce sync.Once
}

// acquireLease takes the lease: creates it when absent, takes it over when
// expired, and fails with a *LockedError when another syncd holds it.
func acquireLease(ctx context.Context, cfg leaseConfig) (*lease, error) {
	now := cfg.now()
	rec := leaseRecord{ID: cfg.id, PID: os.Getpid(), Host: hostname(), Started: now.UTC(), Expires: now.Add(cfg.ttl).UTC(), Sharded: cfg.sharded}
	cur, ver, err := readLease(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if ver != "" && now.Before(cur.Expires) {
		return nil, heldError(cfg, cur)
	}
	raw, _ := json.Marshal(rec)
	newVer, err := blobstore.WriteIf(ctx, cfg.bucket, cfg.key, raw, ver, "application/json")
	if blobstore.IsPrecondition(err) {
		// Someone else created or took it over first.
		if cur, _, rerr := readLease(ctx, cfg); rerr == nil {
			return nil, heldError(cfg, cur)
		}
		return nil, heldError(cfg, leaseRecord{})
	}
	if err != nil {
		return nil, fmt.Errorf("take the lease of state %s: %w", cfg.shown, blobstore.Hint(err, cfg.shown))
	}
	rctx, stop := context.WithCancel(context.Background())
	l := &lease{cfg: cfg, rec: rec, stop: stop, done: make(chan struct{}), ver: newVer, expires: rec.Expires, gone: make(chan struct{})}
	go l.renew(rctx)
	return l, nil
}

func heldError(cfg leaseConfig, cur leaseRecord) error {
	var h *Holder
	if cur.Expires.IsZero() {
		cur.Expires = cfg.now().Add(cfg.ttl)
	}
	if cur.ID != "" {
		h = &Holder{PID: cur.PID, Host: cur.Host, Started: cur.Started}
	}
	return &LockedError{Path: cfg.shown, Holder: h, LeaseExpires: cur.Expires}
}

func readLease(ctx context.Context, cfg leaseConfig) (leaseRecord, blobstore.Version, error) {
	raw, ver, err := blobstore.Read(ctx, cfg.bucket, cfg.key)
	if blobstore.IsNotFound(err) {
		return leaseRecord{}, "", nil
	}
	if err != nil {
		return leaseRecord{}, "", fmt.Errorf("read the lease of state %s: %w", cfg.shown, blobstore.Hint(err, cfg.shown))
	}
	var rec leaseRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		// An unreadable lease protects nothing: treat it as expired.
		return leaseRecord{}, ver, nil
	}
	return rec, ver, nil
}

// renew extends the lease every third of its TTL until stopped, lost or
// expired; at expiry without renewal it closes gone.
func (l *lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(l.cfg.ttl / 3)
	defer t.Stop()
	for {
		l.mu.Lock()
		left := l.expires.Sub(l.cfg.now())
		l.mu.Unlock()
		expiry := time.NewTimer(max(left, 0))
		select {
		case <-ctx.Done():
			expiry.Stop()
			return
		case <-expiry.C:
			if l.valid() != nil {
				return
			}
			continue
		case <-t.C:
			expiry.Stop()
		}
		// The renewal runs apart, and the loop waits for it or for the
		// expiry, whichever comes first: one that hangs (a half-open
		// connection) must not keep Lost open past the expiry while
		// another syncd takes over. It is not cut short either: a write
		// abandoned halfway can leave some stores an object without a
		// version, which no syncd could then take over.
		renewed := make(chan error, 1)
		go func() { renewed <- l.renewOnce(ctx) }()
		l.mu.Lock()
		left = l.expires.Sub(l.cfg.now())
		l.mu.Unlock()
		expiry = time.NewTimer(max(left, 0))
		select {
		case err := <-renewed:
			expiry.Stop()
			if err != nil && l.valid() != nil {
				return
			}
		case <-expiry.C:
			if l.valid() != nil {
				return // gone for good (valid made it so): the renewal's late answer changes nothing
			}
			if err := <-renewed; err != nil && l.valid() != nil {
				return
			}
		case <-ctx.Done():
			expiry.Stop()
			return
		}
	}
}

// markGone closes gone; l.mu is held.
func (l *lease) markGone() { l.goneOnce.Do(func() { close(l.gone) }) }

// renewOnce writes a later expiry. A failed write leaves the old expiry
// standing: writes stop once it passes, unless a later renewal succeeds.
func (l *lease) renewOnce(ctx context.Context) error {
	l.mu.Lock()
	ver := l.ver
	l.mu.Unlock()
	rec := l.rec
	rec.Expires = l.cfg.now().Add(l.cfg.ttl).UTC()
	raw, _ := json.Marshal(rec)
	newVer, err := blobstore.WriteIf(ctx, l.cfg.bucket, l.cfg.key, raw, ver, "application/json")
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.ver, l.expires = newVer, rec.Expires
		return nil
	case blobstore.IsPrecondition(err):
		l.lost = fmt.Errorf("the lease of state %s was taken over by another syncd after this one failed to renew it in time: this one stopped writing; run one syncd at a time on a state", l.cfg.shown)
		l.markGone()
		return l.lost
	default:
		return fmt.Errorf("renew the lease of state %s: %w", l.cfg.shown, err)
	}
}

// valid is nil while the lease is held: not lost, not expired.
func (l *lease) valid() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	if !l.cfg.now().Before(l.expires) {
		// For good: Lost is closed now, so a renewal answered late must
		// not let writes go on.
		l.lost = fmt.Errorf("the lease of state %s expired at %s without being renewed (the bucket did not answer in time): this one stopped writing; rerun", l.cfg.shown, l.expires.Format(time.RFC3339))
		l.markGone()
		return l.lost
	}
	return nil
}

// release stops renewing and deletes the lease object if it is still
// this holder's, so the next syncd need not wait for it to expire.
func (l *lease) release() error {
	l.stop()
	<-l.done
	l.mu.Lock()
	ver, lost := l.ver, l.lost
	l.mu.Unlock()
	if lost != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := blobstore.DeleteIf(ctx, l.cfg.bucket, l.cfg.key, ver)
	// A lease taken over meanwhile is not this holder's to delete.
	if err != nil && !blobstore.IsNotFound(err) && !blobstore.IsPrecondition(err) {
		return fmt.Errorf("release the lease of state %s: %w", l.cfg.shown, err)
	}
	return nil
}
