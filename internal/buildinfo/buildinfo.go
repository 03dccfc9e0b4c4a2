// Package buildinfo names the version a syncd binary prints and stamps
// into its output, from what the build recorded.
package buildinfo

import "runtime/debug"

// Version is the version to print and stamp into output: the
// -ldflags value, else the module version (go install module@v1.2.3) and
// the VCS revision go build records (with -dirty for uncommitted changes),
// or the one stamped with -ldflags, else "dev".
func Version(stamped, stampedRev string, info *debug.BuildInfo, ok bool) string {
	if stamped != "" {
		return stamped
	}
	if !ok || info == nil {
		info = &debug.BuildInfo{}
	}
	v := info.Main.Version
	if v == "(devel)" {
		v = ""
	}
	rev := stampedRev
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	switch {
	case v != "" && rev != "" && !isPseudo(v, rev):
		return v + " (" + rev + ")"
	case v != "":
		return v
	case rev != "":
		return "dev-" + rev
	default:
		return "dev"
	}
}

// isPseudo reports whether v is a pseudo-version that already carries rev.
func isPseudo(v, rev string) bool {
	if len(rev) < 12 {
		return false
	}
	return len(v) >= 12 && v[len(v)-12:] == rev[:12]
}
