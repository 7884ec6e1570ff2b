package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is one Hallmark process: a built binary run in Dir with its output
// appended to Dir/<Name>.log, so a restart keeps the earlier log.
type Proc struct {
	Name string   // names the log file and the log dump
	Dir  string   // working directory, where the log is
	Bin  string   // "hallmark-frontend" or "hallmark-worker" (see Bin)
	Args []string // e.g. --config path
	Env  []string // added to the test's environment

	Cmd *exec.Cmd // the running process, nil when not running
	log *os.File
}

// LogPath is where the process's output goes.
func (p *Proc) LogPath() string { return filepath.Join(p.Dir, p.Name+".log") }

// Log is the process's log so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.LogPath())
	return string(b)
}

// Start starts (or restarts) the process.
func (p *Proc) Start(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(p.LogPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Bin(p.Bin), p.Args...)
	cmd.Dir = p.Dir
	if len(p.Env) > 0 {
		cmd.Env = append(os.Environ(), p.Env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", p.Name, err)
	}
	p.Cmd, p.log = cmd, logf
}

// Kill sends SIGKILL, as a crash would (SIGCONT first, in case a test
// stopped it).
func (p *Proc) Kill() {
	if p.Cmd == nil || p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Kill()
	_ = p.Cmd.Wait()
	p.Cmd = nil
	p.log.Close()
}

// Stop asks the process to shut down (SIGTERM) and kills it if it has not
// within 15 seconds.
func (p *Proc) Stop() {
	if p.Cmd == nil || p.Cmd.Process == nil {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGCONT)
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-done
	}
	p.Cmd = nil
	p.log.Close()
}

// StopAll stops procs at once and, when t has failed, puts the end of each
// one's log in the test output.
func StopAll(t *testing.T, procs ...*Proc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func(p *Proc) { defer wg.Done(); p.Stop() }(p)
	}
	wg.Wait()
	if t.Failed() {
		for _, p := range procs {
			t.Logf("---- %s log ----\n%s", p.Name, Tail(p.Log(), 6000))
		}
	}
}

// Run runs a built binary to completion in dir, failing the test on error,
// and returns its output.
func Run(t *testing.T, dir string, env []string, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(Bin(bin), args...)
	cmd.Dir = dir
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
	}
	return string(out)
}
