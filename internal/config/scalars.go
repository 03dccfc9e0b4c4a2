package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Secret is a string that never prints itself.
type Secret string

// String redacts the secret for %v and %s.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts the secret for %#v.
func (s Secret) GoString() string { return `"[redacted]"` }

// MarshalYAML redacts the secret when a config is printed: *** when set.
func (s Secret) MarshalYAML() (any, error) {
	if s == "" {
		return "", nil
	}
	return "***", nil
}

// Reveal returns the secret for the one place that must send it.
func (s Secret) Reveal() string { return string(s) }

// Duration is a time.Duration written as "90s", "2m", "1h30m".
type Duration time.Duration

// UnmarshalYAML parses a Go duration string, or a whole number of days
// ("30d").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if days, ok := strings.CutSuffix(n.Value, "d"); ok {
		if v, err := strconv.Atoi(days); err == nil && v >= 0 {
			*d = Duration(time.Duration(v) * 24 * time.Hour)
			return nil
		}
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration: write it like 90s, 2m, 1h30m or 30d", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML prints the duration as the config takes it: whole days as
// "30d", otherwise in Go syntax without zero units ("1h30m", "90s").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// String is the duration as MarshalYAML prints it.
func (d Duration) String() string {
	v := time.Duration(d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", v/(24*time.Hour))
	}
	s := v.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Date is a UTC instant given as a date ("2024-01-31") or an RFC 3339 time.
type Date struct{ time.Time }

// UnmarshalYAML accepts a date or an RFC 3339 timestamp.
func (d *Date) UnmarshalYAML(n *yaml.Node) error {
	t, err := ParseDate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	d.Time = t
	return nil
}

// MarshalYAML prints the date in RFC 3339.
func (d Date) MarshalYAML() (any, error) {
	if d.IsZero() {
		return "", nil
	}
	return d.Format(time.RFC3339), nil
}

// ParseDate accepts "2024-01-31" (UTC midnight) or any RFC 3339 timestamp.
func ParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a date: write it as 2024-01-31 or 2024-01-31T12:00:00Z", s)
}
