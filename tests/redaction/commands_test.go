package redaction

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// commands lists every command of a built binary by reading its --help and
// each command's in turn, as "bin cmd sub" paths, parents before their
// subcommands; help itself is left out.
func commands(t *testing.T, bin string) []string {
	t.Helper()
	var out []string
	var walk func(path []string)
	walk = func(path []string) {
		help, err := exec.Command(harness.Bin(bin), append(path, "--help")...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s --help: %v\n%s", bin, strings.Join(path, " "), err, help)
		}
		for _, name := range helpCommands(string(help)) {
			sub := append(append([]string{}, path...), name)
			out = append(out, strings.Join(append([]string{bin}, sub...), " "))
			walk(sub)
		}
	}
	walk(nil)
	return out
}

// helpCommands are the command names in urfave/cli's COMMANDS: section.
func helpCommands(help string) []string {
	_, section, ok := strings.Cut(help, "COMMANDS:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(section, "\n") {
		if strings.TrimSpace(line) == "" || !strings.HasPrefix(line, "   ") {
			break
		}
		name := strings.TrimSuffix(strings.Fields(line)[0], ",")
		if name != "help" {
			names = append(names, name)
		}
	}
	return names
}

// TestCommandsAreFound keeps the discovery honest: it finds the commands
// docs/cli.md documents, nested ones included.
func TestCommandsAreFound(t *testing.T) {
	got := strings.Join(commands(t, "hallmark"), "\n")
	for _, want := range []string{"hallmark migrate", "hallmark migrate status", "hallmark up", "hallmark accounts deactivate", "hallmark ari move", "hallmark version"} {
		if !strings.Contains(got+"\n", want+"\n") {
			t.Errorf("%q is not among the commands found:\n%s", want, got)
		}
	}
	if w := strings.Join(commands(t, "hallmark-worker"), "\n"); !strings.Contains(w, "hallmark-worker ca init") {
		t.Errorf("hallmark-worker ca init is not among %s", w)
	}
}
