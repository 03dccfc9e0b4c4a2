package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/syncd-dev/syncd/internal/logkey"

	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/syncd-dev/syncd/internal/blobstore"
)

// record is a member object: who heartbeats, until when (by its own
// clock), and the accounts it owns, so that peers do not spend a Claim on
// an account a live member lists.
type record struct {
	ID      string    `json:"id"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	Expires time.Time `json:"expires"`
	Owned   []string  `json:"owned"`
}

// MembersURL is the folder of member objects beside a state URL: the
// state's path with ".members" appended, its query kept
// (s3://b/syncd/state?endpoint=… gives s3://b/syncd/state.members?endpoint=…).
func MembersURL(stateURL string) (string, error) {
	u, err := url.Parse(stateURL)
	if err != nil {
		return "", fmt.Errorf("state URL %q: %w", stateURL, err)
	}
	p := strings.TrimSuffix(u.Path, "/")
	if p == "" {
		return "", fmt.Errorf("state URL %q names no path to put the members beside", stateURL)
	}
	u.Path, u.RawPath = p+".members", ""
	return u.String(), nil
}

// heartbeat writes this member's object with a new expiry and the
// accounts it owns. The write is conditional on the version last written,
// so that two processes configured with the same ID notice each other
// instead of silently sharing one membership.
func (c *Coordinator) heartbeat(ctx context.Context) {
	c.beatMu.Lock()
	defer c.beatMu.Unlock()
	if c.left {
		return
	}
	now := c.now()
	rec := record{ID: c.id, Host: c.host, PID: c.pid, Started: c.started, Expires: now.Add(c.ttl).UTC(), Owned: c.Owned()}
	raw, err := json.Marshal(rec)
	if err != nil {
		c.fail("encode the heartbeat", err)
		return
	}
	ver, err := c.writeMember(ctx, raw)
	if err != nil {
		c.known = false
		if ctx.Err() == nil {
			c.fail("write the heartbeat of member "+c.id, blobstore.Hint(err, c.shown))
		}
		return
	}
	c.ver, c.known = ver, true
	c.mu.Lock()
	c.expires = rec.Expires
	c.stats.Heartbeats++
	c.mu.Unlock()
}

// writeMember writes raw as this member's object on the version last
// written; c.beatMu is held.
func (c *Coordinator) writeMember(ctx context.Context, raw []byte) (blobstore.Version, error) {
	ver, err := blobstore.WriteIf(ctx, c.bucket, c.id, raw, c.ver, "application/json")
	if errors.Is(err, blobstore.ErrNoConditions) {
		// file://: one host, where IDs are unique by the random suffix.
		return "", c.bucket.WriteAll(ctx, c.id, raw, &blob.WriterOptions{ContentType: "application/json"})
	}
	if !blobstore.IsPrecondition(err) {
		return ver, err
	}
	// The object is absent or not as last written: the first heartbeat
	// finds an earlier process's object with this ID (a restarted
	// StatefulSet pod: ours to take over), a failed write leaves the
	// version unknown, and otherwise a live process heartbeats with this
	// ID, which is a configuration error.
	if c.known {
		c.log.Warn("the member object was replaced: another process heartbeats with this member ID", zap.String(logkey.Member, c.id))
	}
	_, cur, err := blobstore.Read(ctx, c.bucket, c.id)
	if blobstore.IsNotFound(err) {
		cur, err = "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read member %s: %w", c.id, err)
	}
	return blobstore.WriteIf(ctx, c.bucket, c.id, raw, cur, "application/json")
}

// leave deletes this member's object and stops heartbeats for good, so
// that peers count one member fewer at their next tick.
func (c *Coordinator) leave(ctx context.Context) error {
	c.beatMu.Lock()
	defer c.beatMu.Unlock()
	if c.left {
		return nil
	}
	c.left = true
	c.mu.Lock()
	c.expires = time.Time{}
	c.mu.Unlock()
	err := c.bucket.Delete(ctx, c.id)
	if err != nil && !blobstore.IsNotFound(err) {
		return fmt.Errorf("delete the heartbeat of member %s: %w", c.id, blobstore.Hint(err, c.shown))
	}
	return nil
}

// members lists the live members (expiry in the future by this process's
// clock) by ID. Records expired for more than a TTL are deleted, so that
// a Deployment's ever-new pod names do not pile up.
func (c *Coordinator) members(ctx context.Context) (map[string]record, error) {
	now := c.now()
	live := make(map[string]record)
	it := c.bucket.List(&blob.ListOptions{Delimiter: "/"})
	for {
		obj, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			return live, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list the members in %s: %w", c.shown, blobstore.Hint(err, c.shown))
		}
		if obj.IsDir {
			continue
		}
		raw, ver, err := c.readMember(ctx, obj.Key)
		if blobstore.IsNotFound(err) {
			continue // left between the listing and the read
		}
		if err != nil {
			return nil, fmt.Errorf("read member %s: %w", obj.Key, blobstore.Hint(err, c.shown))
		}
		var rec record
		if err := json.Unmarshal(raw, &rec); err != nil {
			c.log.Warn("ignoring an unreadable member object", zap.String(logkey.Key, obj.Key), zap.Error(err))
			continue
		}
		rec.ID = obj.Key // the key is what the member rewrites
		switch {
		case now.Before(rec.Expires):
			live[rec.ID] = rec
		case rec.ID != c.id && now.After(rec.Expires.Add(c.ttl)):
			c.collect(ctx, rec.ID, ver)
		}
	}
}

// readMember reads a member object. A read that fails is tried again,
// four times over 150ms: the member rewrites its object every interval, and a store may
// serve a read racing that write torn (versitygw's posix backend fails
// it on the checksum).
func (c *Coordinator) readMember(ctx context.Context, key string) ([]byte, blobstore.Version, error) {
	var err error
	for try := range 5 {
		if try > 0 {
			select {
			case <-time.After(10 * time.Millisecond << (try - 1)):
			case <-ctx.Done():
				return nil, "", ctx.Err()
			}
		}
		var raw []byte
		var ver blobstore.Version
		raw, ver, err = blobstore.Read(ctx, c.bucket, key)
		if errors.Is(err, blobstore.ErrNoConditions) {
			raw, err = c.bucket.ReadAll(ctx, key)
		}
		if err == nil || blobstore.IsNotFound(err) {
			return raw, ver, err
		}
	}
	return nil, "", err
}

// collect deletes a long-expired member object, unless it was rewritten
// since it was read (the member came back).
func (c *Coordinator) collect(ctx context.Context, id string, ver blobstore.Version) {
	var err error
	if ver == "" {
		err = c.bucket.Delete(ctx, id)
	} else {
		err = blobstore.DeleteIf(ctx, c.bucket, id, ver)
	}
	if err != nil && !blobstore.IsNotFound(err) && !blobstore.IsPrecondition(err) {
		c.log.Debug("could not delete an expired member object", zap.String(logkey.Member, id), zap.Error(err))
	}
}
