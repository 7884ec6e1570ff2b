// Package version is what every Hallmark binary reports about its own
// build: the version (`git describe --tags --always --dirty`), the commit
// and the build date. The Makefile sets them with -ldflags -X; a binary
// built without them (go build, go install) falls back to what the Go
// toolchain recorded (debug.ReadBuildInfo: the module version, vcs.revision,
// vcs.time), and says "unknown" for what it has neither of.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// Set by the Makefile: -ldflags "-X <this package>.version=v1.2.3 ...".
var (
	version string
	commit  string
	date    string
)

// Unknown stands for a field neither the linker flags nor the build
// information supplied.
const Unknown = "unknown"

// Info is one binary's build.
type Info struct {
	Version string // "v1.2.3", "v1.2.3-4-gabcdef0-dirty", or a bare commit when untagged
	Commit  string // the full commit hash
	Date    string // RFC 3339, UTC
	Go      string // the Go release it was built with
}

// Get returns this binary's build information.
func Get() Info {
	return resolve(version, commit, date, readBuildInfo)
}

func readBuildInfo() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

// resolve fills what the linker flags left empty from the build
// information, then anything still empty with Unknown.
func resolve(v, c, d string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: v, Commit: c, Date: d, Go: runtime.Version()}
	if bi, ok := read(); ok {
		vcs := map[string]string{}
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
		if in.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			in.Version = bi.Main.Version
		}
		if in.Commit == "" {
			in.Commit = vcs["vcs.revision"]
		}
		if in.Date == "" {
			in.Date = vcs["vcs.time"]
		}
		if in.Version == "" && in.Commit != "" {
			in.Version = short(in.Commit)
			if vcs["vcs.modified"] == "true" {
				in.Version += "-dirty"
			}
		}
		if bi.GoVersion != "" {
			in.Go = bi.GoVersion
		}
	}
	for _, f := range []*string{&in.Version, &in.Commit, &in.Date} {
		if *f == "" {
			*f = Unknown
		}
	}
	return in
}

// short is the abbreviated commit `git describe --always` would print.
func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

// String is the one line a binary prints and serves:
// "v1.2.3 (commit 0123abc…, built 2026-01-02T03:04:05Z, go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s)", i.Version, i.Commit, i.Date, i.Go)
}

// Line is the version line of one binary: "hallmark-worker v1.2.3 (...)".
func Line(binary string) string {
	return strings.TrimSpace(binary + " " + Get().String())
}

// Command is every binary's `version` command: it prints Line.
func Command(binary string) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print the version, the commit and the build date",
		Action: func(c *cli.Context) error {
			_, err := fmt.Fprintln(c.App.Writer, Line(binary))
			return err
		},
	}
}
