// Package progress shows how far a long command (a backfill) has come: a
// bar on a terminal, a log line every few seconds otherwise.
package progress

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"go.uber.org/zap"

	"github.com/syncd-dev/syncd/internal/logkey"
	"github.com/syncd-dev/syncd/internal/poller"
)

// Reporter draws a bar on a terminal and logs a line every few seconds
// otherwise.
type Reporter struct {
	mu      sync.Mutex
	w       io.Writer
	bar     *progressbar.ProgressBar
	log     *zap.Logger
	formID  string
	last    time.Time
	started time.Time
}

// NewReporter reports the progress of stream formID to w, a terminal when
// terminal is set, and to log.
func NewReporter(w io.Writer, log *zap.Logger, formID string, terminal bool) *Reporter {
	p := &Reporter{w: w, log: log, formID: formID, started: time.Now()}
	if terminal {
		barShown.Store(true) // log lines clear it first (LineClearer)
		p.bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetDescription("backfill "+formID),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("rows"),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
		)
	}
	return p
}

// Update shows pr.
func (p *Reporter) Update(pr poller.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pr.CoveredBefore {
		p.log.Info("backfill: the range is already synced; nothing to fetch", zap.String(logkey.Stream, p.formID))
		return
	}
	if p.bar != nil {
		if pr.ExpectedRows > 0 && p.bar.GetMax64() != pr.ExpectedRows {
			p.bar.ChangeMax64(pr.ExpectedRows)
		}
		_ = p.bar.Set64(pr.Rows)
		return
	}
	if time.Since(p.last) < 5*time.Second {
		return
	}
	p.last = time.Now()
	elapsed := time.Since(p.started).Seconds()
	rate := float64(pr.Rows) / max(elapsed, 0.001)
	fields := []zap.Field{zap.String(logkey.Stream, p.formID), zap.Int64(logkey.Rows, pr.Rows), zap.Int64(logkey.ExpectedRows, pr.ExpectedRows),
		zap.Int(logkey.Batches, pr.Windows), zap.Float64(logkey.RowsPerSecond, rate)}
	if rate > 0 && pr.ExpectedRows > pr.Rows {
		fields = append(fields, zap.Duration(logkey.ETA, time.Duration(float64(pr.ExpectedRows-pr.Rows)/rate*float64(time.Second)).Round(time.Second)))
	}
	p.log.Info("backfill progress", fields...)
}

// Finish ends the bar: at 100% when the backfill completed (r ended well),
// where it stood otherwise (interrupted or failed), never drawn full.
func (p *Reporter) Finish(r poller.Result) {
	if p.bar == nil {
		return
	}
	if r.Err == nil && !r.Interrupted {
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Exit()
	}
	barShown.Store(false)
	fmt.Fprintln(p.w)
}

// barShown is set while a progress bar is drawn on the terminal: a log
// line written then clears the bar's line first, so that it does not
// overwrite (or get overwritten by) the bar, which is drawn again below
// it at its next update. It is the process's one terminal, shared by the
// log's writer and the bar: hence a package variable.
var barShown atomic.Bool

// LineClearer is the log's writer: while a progress bar is shown, each log
// line first clears the terminal line the bar is on.
type LineClearer struct{ W io.Writer }

func (l LineClearer) Write(b []byte) (int, error) {
	if barShown.Load() {
		if _, err := io.WriteString(l.W, "\r\x1b[K"); err != nil {
			return 0, err
		}
	}
	return l.W.Write(b)
}
