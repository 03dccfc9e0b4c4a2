package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestVersionString(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := []struct {
		name       string
		stamped    string
		stampedRev string
		info       *debug.BuildInfo
		ok         bool
		want       string
	}{
		{"ldflags win", "v1.4.0", "", &debug.BuildInfo{Main: debug.Module{Version: "v9"}}, true, "v1.4.0"},
		{"no build info", "", "", nil, false, "dev"},
		{"go build without VCS", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev"},
		{"go build in a clean checkout", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("false")}, true, "dev-0123456789ab"},
		{"go build with changes", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")}, true, "dev-0123456789ab-dirty"},
		{"go install module@version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, true, "v1.2.3"},
		{"tagged build with VCS", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: vcs("false")}, true, "v1.2.3 (0123456789ab)"},
		{"pseudo-version carries the revision", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261101120000-0123456789ab"}, Settings: vcs("false")}, true, "v0.0.0-20261101120000-0123456789ab"},
		{"docker: revision by ldflags", "", rev, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, true, "dev-0123456789ab"},
	}
	for _, tt := range tests {
		if got := Version(tt.stamped, tt.stampedRev, tt.info, tt.ok); got != tt.want {
			t.Errorf("%s: Version = %q, want %q", tt.name, got, tt.want)
		}
	}
}
