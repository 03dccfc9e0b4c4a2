// Package simhook delivers the simulators' webhooks (formsim, schedsim) the
// way a real service does on a bad day: best effort, one attempt per copy,
// with faults a receiver must survive. A delivery may be dropped, sent
// twice or more, delayed (each copy on its own, so deliveries arrive out of
// order), sent in its bare shape instead of the envelope, or signed with a
// wrong secret.
//
// Every fault is decided when the event happens, from one seeded source
// under a lock, so a run with the same seed, faults and event sequence
// injects the same faults; only the network timing varies. Deliveries run
// in the background and Close ends them (and pending delays) and waits.
//
// Subscriber URLs may carry a receiver's secret (a path token), so nothing
// here logs a URL or puts one in an error.
package simhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Faults are the delivery fault knobs; the zero value delivers every event
// once, at once, as the service's default shape.
type Faults struct {
	// DropRate is the share of deliveries never sent.
	DropRate float64
	// DuplicateRate is the share of deliveries sent more than once: twice,
	// or (one in four of them) three times, each copy the same bytes.
	DuplicateRate float64
	// Each copy waits a delay drawn uniformly from [DelayMin, DelayMax]
	// before it is sent; copies are delayed independently, which reorders
	// deliveries (and the copies of one) whenever DelayMax > DelayMin.
	// DelayMax 0 with DelayMin set is a fixed delay.
	DelayMin, DelayMax time.Duration
	// BareRate is the share of deliveries sent in the bare shape
	// (Message.Bare) instead of Message.Body; no effect without one.
	BareRate float64
	// BadSignatureRate is the share of deliveries signed with a wrong
	// secret (Message.Header is asked for forged headers); no effect
	// without a Header function.
	BadSignatureRate float64
}

// Validate names the first knob out of range.
func (f Faults) Validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"drop rate", f.DropRate}, {"duplicate rate", f.DuplicateRate}, {"bare rate", f.BareRate}, {"bad signature rate", f.BadSignatureRate}} {
		if !(r.v >= 0 && r.v <= 1) { // NaN fails too
			return fmt.Errorf("webhook %s %v is not a share: give a number from 0 to 1", r.name, r.v)
		}
	}
	switch {
	case f.DelayMin < 0 || f.DelayMax < 0:
		return fmt.Errorf("webhook delays %s..%s must not be negative", f.DelayMin, f.DelayMax)
	case f.DelayMax != 0 && f.DelayMax < f.DelayMin:
		return fmt.Errorf("webhook delay max %s is less than min %s: give max >= min (or max 0 for a fixed delay)", f.DelayMax, f.DelayMin)
	}
	return nil
}

// AddFlags registers the knobs on fs as --webhook-drop-rate,
// --webhook-duplicate-rate, --webhook-delay-min, --webhook-delay-max, and
// --webhook-bare-rate when the service has a bare shape (bare) and
// --webhook-bad-signature-rate when it signs (signed). Check Validate
// after parsing.
func (f *Faults) AddFlags(fs *flag.FlagSet, bare, signed bool) {
	fs.Float64Var(&f.DropRate, "webhook-drop-rate", f.DropRate, "share of webhook deliveries never sent")
	fs.Float64Var(&f.DuplicateRate, "webhook-duplicate-rate", f.DuplicateRate, "share of webhook deliveries sent twice or three times")
	fs.DurationVar(&f.DelayMin, "webhook-delay-min", f.DelayMin, "least delay of a webhook delivery")
	fs.DurationVar(&f.DelayMax, "webhook-delay-max", f.DelayMax, "most delay of a webhook delivery, each drawn on its own (reorders them); 0: --webhook-delay-min")
	if bare {
		fs.Float64Var(&f.BareRate, "webhook-bare-rate", f.BareRate, "share of webhook deliveries sent as the bare submission instead of the envelope")
	}
	if signed {
		fs.Float64Var(&f.BadSignatureRate, "webhook-bad-signature-rate", f.BadSignatureRate, "share of webhook deliveries signed with a wrong secret")
	}
}

// faultsJSON is Faults on the wire of the admin endpoints: durations as Go
// duration strings ("250ms").
type faultsJSON struct {
	DropRate         float64 `json:"drop_rate"`
	DuplicateRate    float64 `json:"duplicate_rate"`
	DelayMin         string  `json:"delay_min"`
	DelayMax         string  `json:"delay_max"`
	BareRate         float64 `json:"bare_rate"`
	BadSignatureRate float64 `json:"bad_signature_rate"`
}

// MarshalJSON writes the knobs with snake_case names and durations as
// strings.
func (f Faults) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultsJSON{f.DropRate, f.DuplicateRate, f.DelayMin.String(), f.DelayMax.String(), f.BareRate, f.BadSignatureRate})
}

// UnmarshalJSON reads what MarshalJSON writes; absent knobs are zero, an
// unknown one is an error (a misspelt knob would silently do nothing).
func (f *Faults) UnmarshalJSON(b []byte) error {
	var j faultsJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("webhook faults: %w (knobs: drop_rate, duplicate_rate, delay_min, delay_max, bare_rate, bad_signature_rate)", err)
	}
	out := Faults{DropRate: j.DropRate, DuplicateRate: j.DuplicateRate, BareRate: j.BareRate, BadSignatureRate: j.BadSignatureRate}
	for _, d := range []struct {
		name, text string
		dst        *time.Duration
	}{{"delay_min", j.DelayMin, &out.DelayMin}, {"delay_max", j.DelayMax, &out.DelayMax}} {
		if d.text == "" {
			continue
		}
		v, err := time.ParseDuration(d.text)
		if err != nil {
			return fmt.Errorf("webhook faults: %s %q is not a duration such as \"250ms\"", d.name, d.text)
		}
		*d.dst = v
	}
	*f = out
	return nil
}

// Stats count deliveries. A delivery is one event for one subscriber; it
// makes zero (dropped), one or more (duplicated) attempts.
type Stats struct {
	Deliveries   int64 `json:"deliveries"`    // events handed to Send
	Attempted    int64 `json:"attempted"`     // POSTs started, copies included
	Delivered    int64 `json:"delivered"`     // attempts answered 2xx
	Failed       int64 `json:"failed"`        // attempts that failed, were answered otherwise, or were ended by Close
	Dropped      int64 `json:"dropped"`       // deliveries never sent
	Duplicated   int64 `json:"duplicated"`    // deliveries sent more than once
	Copies       int64 `json:"copies"`        // extra attempts of duplicated deliveries
	Bare         int64 `json:"bare"`          // deliveries sent in the bare shape
	BadSignature int64 `json:"bad_signature"` // deliveries signed with a wrong secret
	Delayed      int64 `json:"delayed"`       // attempts that waited a delay first
}

// Message is one event for one subscriber.
type Message struct {
	URL  string
	Body []byte // the service's usual shape
	Bare []byte // the alternative shape chosen at Faults.BareRate; nil: never
	// Header returns the headers of an attempt with body; forged asks for
	// a signature made with a wrong secret. Nil: Content-Type only.
	Header func(body []byte, forged bool) http.Header
}

// maxPosting bounds the attempts of one Deliverer posting at once, so a
// burst of events does not open a connection each.
const maxPosting = 16

// Deliverer sends messages in the background. Safe for concurrent use.
type Deliverer struct {
	client *http.Client
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // bounds the attempts posting at once

	mu      sync.Mutex
	closed  bool
	pending int // attempts not finished, delays included
	rng     *rand.Rand
	faults  Faults
	stats   Stats
}

// New returns a Deliverer whose fault decisions come from seed and whose
// attempts time out after timeout (default 5s).
func New(seed uint64, timeout time.Duration, f Faults) (*Deliverer, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Deliverer{
		client: &http.Client{
			Timeout:   timeout,
			Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second},
			// A receiver answers; it does not send the delivery elsewhere
			// (Cal.com posts with redirect: "manual").
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		ctx:    ctx,
		cancel: cancel,
		slots:  make(chan struct{}, maxPosting),
		rng:    rand.New(rand.NewPCG(seed, 0x3e6b_00c5)),
		faults: f,
	}, nil
}

// SetFaults replaces the knobs for deliveries from now on.
func (d *Deliverer) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.faults = f
	return nil
}

// Faults returns the current knobs.
func (d *Deliverer) Faults() Faults {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.faults
}

// Stats returns a copy of the counters.
func (d *Deliverer) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// plan is what the faults chose for one delivery.
type plan struct {
	body   []byte
	forged bool
	delays []time.Duration // one per copy; none: dropped
}

// maxCopies is the most copies of one delivery (a duplicate's third).
const maxCopies = 3

// decide draws the faults of one delivery; callers hold d.mu. Every
// delivery makes the same draws, in a fixed order and all up front, whatever
// the knobs and its fate (dropped, copies, delays), so changing one knob
// does not shift the decisions of the others or of later deliveries.
func (d *Deliverer) decide(m *Message) plan {
	f := &d.faults
	drop, dup, third, bare, forged := d.rng.Float64(), d.rng.Float64(), d.rng.IntN(4), d.rng.Float64(), d.rng.Float64()
	var jitter [maxCopies]uint64
	for i := range jitter {
		jitter[i] = d.rng.Uint64()
	}
	d.stats.Deliveries++
	p := plan{body: m.Body}
	if drop < f.DropRate {
		d.stats.Dropped++
		return p
	}
	if m.Bare != nil && bare < f.BareRate {
		p.body = m.Bare
		d.stats.Bare++
	}
	if m.Header != nil && forged < f.BadSignatureRate {
		p.forged = true
		d.stats.BadSignature++
	}
	n := 1
	if dup < f.DuplicateRate {
		n = 2
		if third == 0 {
			n = 3
		}
		d.stats.Duplicated++
		d.stats.Copies += int64(n - 1)
	}
	for i := range n {
		delay := f.DelayMin
		if span := max(f.DelayMax, f.DelayMin) - f.DelayMin; span > 0 {
			// The high word of jitter × (span+1) is uniform over [0, span]
			// (to within 2⁻⁶⁴ per value) and, unlike Int64N, never draws
			// again.
			hi, _ := bits.Mul64(jitter[i], uint64(span)+1)
			delay += time.Duration(hi)
		}
		if delay > 0 {
			d.stats.Delayed++
		}
		p.delays = append(p.delays, delay)
	}
	return p
}

// Send decides the faults of m now and delivers it in the background.
// After Close it does nothing.
func (d *Deliverer) Send(m Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	p := d.decide(&m)
	h := http.Header{"Content-Type": {"application/json"}}
	if m.Header != nil {
		h = m.Header(p.body, p.forged)
	}
	for _, delay := range p.delays {
		d.wg.Add(1) // under mu, so Close's Wait sees it
		d.pending++
		go d.attempt(m.URL, p.body, h, delay)
	}
}

// attempt waits delay, then posts once.
func (d *Deliverer) attempt(url string, body []byte, h http.Header, delay time.Duration) {
	defer d.wg.Done()
	ok := false
	defer func() {
		d.mu.Lock()
		if ok {
			d.stats.Delivered++
		} else {
			d.stats.Failed++
		}
		d.pending--
		d.mu.Unlock()
	}()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-d.ctx.Done():
			return
		}
	}
	select {
	case d.slots <- struct{}{}:
		defer func() { <-d.slots }()
	case <-d.ctx.Done():
		return
	}
	d.mu.Lock()
	d.stats.Attempted++
	d.mu.Unlock()
	ok = d.post(url, body, h) == nil
}

// Drain waits until every delivery handed to Send so far has been
// attempted and answered (delays included), or ctx ends.
func (d *Deliverer) Drain(ctx context.Context) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		d.mu.Lock()
		n := d.pending
		d.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("webhook deliveries: %d attempts still pending: %w", n, ctx.Err())
		case <-t.C:
		}
	}
}

// post makes one attempt; the error never names the URL.
func (d *Deliverer) post(url string, body []byte, h http.Header) error {
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return errors.New("webhook delivery: bad subscriber URL")
	}
	req.Header = h.Clone()
	resp, err := d.client.Do(req)
	if err != nil {
		return errors.New("webhook delivery: the receiver did not answer")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // reuse the connection
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook delivery: answered %d", resp.StatusCode)
	}
	return nil
}

// Close ends deliveries in flight and pending delays, and waits for them.
// It is safe to call more than once.
func (d *Deliverer) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	d.client.CloseIdleConnections()
}
