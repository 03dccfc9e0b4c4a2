package textfmt

import (
	"fmt"
	"strings"
	"time"
)

// Age is a duration as a person reads it: "42s", "3h5m", "989d 21h"
// (never "23737h21m7s").
func Age(d time.Duration) string {
	if d < 0 {
		return "-" + Age(-d)
	}
	switch {
	case d >= 48*time.Hour:
		days, hours := d/(24*time.Hour), (d%(24*time.Hour))/time.Hour
		return fmt.Sprintf("%dd %dh", days, hours)
	case d >= time.Hour:
		s := strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	default:
		return d.Round(time.Second).String()
	}
}

// Time is an instant of a window or a batch, to the millisecond in UTC;
// the Unix epoch, where a form's windows start, is "beginning".
func Time(t time.Time) string {
	if t.Equal(time.Unix(0, 0)) {
		return "beginning"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
