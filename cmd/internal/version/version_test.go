package version

import (
	"runtime/debug"
	"testing"
)

// TestResolve: the linker flags win; without them the module version and
// the VCS stamps the Go toolchain recorded are used (a modified tree marked
// -dirty, as git describe does); with neither, each field says unknown.
func TestResolve(t *testing.T) {
	t.Parallel()
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		}}, true
	}
	installed := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	for _, tc := range []struct {
		name    string
		v, c, d string
		read    func() (*debug.BuildInfo, bool)
		want    Info
	}{
		{"linker flags", "v1.4.0-2-gabcdef0", "abcdef0123", "2026-05-06T07:08:09Z", stamped,
			Info{"v1.4.0-2-gabcdef0", "abcdef0123", "2026-05-06T07:08:09Z", "go1.26.8"}},
		{"VCS stamps", "", "", "", stamped,
			Info{"0123456-dirty", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", "go1.26.8"}},
		{"go install module@v1.2.3", "", "", "", installed, Info{"v1.2.3", Unknown, Unknown, "go1.26.8"}},
		{"nothing recorded", "", "", "", none, Info{Unknown, Unknown, Unknown, resolve("", "", "", none).Go}},
	} {
		if got := resolve(tc.v, tc.c, tc.d, tc.read); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if got, want := (Info{"v1.2.3", "abc", "2026-01-02T03:04:05Z", "go1.26.8"}).String(), "v1.2.3 (commit abc, built 2026-01-02T03:04:05Z, go1.26.8)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
