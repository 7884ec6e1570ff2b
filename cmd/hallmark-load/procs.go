package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel fixes it for
// userspace regardless of CONFIG_HZ).
const clockTick = 10 * time.Millisecond

// procSet names the server processes whose CPU time and peak RSS a run
// reports, by group ("frontend", "worker", "pebble"), plus, when
// pgDatabase is set, the PostgreSQL backends connected to that database.
type procSet struct {
	pids       map[string][]int
	pgDatabase string
	pgAdmin    string // where to read pg_stat_database for pgDatabase
}

type procSample struct {
	cpu      map[string]time.Duration
	rss      map[string]int64 // VmHWM, KiB
	switches map[string]int64 // context switches, voluntary and not, of every thread
	commits  int64            // pg_stat_database.xact_commit of pgDatabase
}

// pgCommits reads how many transactions pgDatabase has committed. The
// statistics collector publishes a backend's counts within about a second
// of its transaction, so callers wait a moment before the final reading.
func (p procSet) pgCommits() int64 {
	if p.pgAdmin == "" || p.pgDatabase == "" {
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.pgAdmin)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	var n int64
	_ = conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = $1`, p.pgDatabase).Scan(&n)
	return n
}

// sharedPrefix marks groups that are reported but not counted in a run's
// total: PostgreSQL's WAL writer serves every database of the cluster,
// including other users' on a shared machine.
const sharedPrefix = "(shared) "

func (p procSet) sample() (procSample, error) {
	s := procSample{cpu: map[string]time.Duration{}, rss: map[string]int64{}, switches: map[string]int64{}, commits: p.pgCommits()}
	for group, pids := range p.pids {
		for _, pid := range pids {
			cpu, err := procCPU(pid)
			if err != nil {
				return s, fmt.Errorf("measuring %s (pid %d): %w", group, pid, err)
			}
			s.cpu[group] += cpu
			s.rss[group] += procHWM(pid)
			s.switches[group] += procSwitches(pid)
		}
	}
	if p.pgDatabase == "" {
		return s, nil
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("postgres: ")) {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		group := ""
		switch {
		case strings.Contains(cmd, " "+p.pgDatabase+" "):
			group = "postgres"
		case strings.Contains(cmd, "walwriter"):
			group = sharedPrefix + "postgres walwriter"
		default:
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		if cpu, err := procCPU(pid); err == nil {
			s.cpu[group] += cpu
			s.switches[group] += procSwitches(pid)
		}
	}
	return s, nil
}

func diffCPU(before, after procSample) map[string]time.Duration {
	out := map[string]time.Duration{}
	for g, a := range after.cpu {
		out[g] = a - before.cpu[g]
	}
	return out
}

func diffSwitches(before, after procSample) map[string]int64 {
	out := map[string]int64{}
	for g, a := range after.switches {
		out[g] = a - before.switches[g]
	}
	return out
}

// procSwitches is how many times pid's live threads have been switched
// out, voluntarily (waiting: a round trip, a lock, an idle thread parking)
// or not (preempted). On a hypervisor where a switch is dear it is what a
// round trip between processes costs.
func procSwitches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/status", pid))
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		for _, line := range strings.Split(string(b), "\n") {
			for _, key := range []string{"voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"} {
				if v, ok := strings.CutPrefix(line, key); ok {
					k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
					n += k
				}
			}
		}
	}
	return n
}

// procCPU is utime+stime of pid.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unreadable times in /proc/%d/stat", pid)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// procHWM is VmHWM (peak resident set) of pid in KiB, 0 if unknown.
func procHWM(pid int) int64 { return procStatusKiB(pid, "VmHWM:") }

// procStatusKiB is the "key:" line of pid's /proc status in KiB, 0 if
// unknown.
func procStatusKiB(pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// anonPeaks samples the anonymous resident memory (RssAnon: heap, stacks)
// of each group's processes every period until ctx ends, and returns the
// highest sum seen per group, in KiB, once it has stopped. Peak RSS
// (VmHWM) also counts the pages of the binary's file, and the kernel may
// map a freshly written binary in 2 MiB pages that count whole (the same
// worker reads 61 MiB freshly linked, 57 as a copy). Linux keeps no peak of
// RssAnon, hence the sampling.
func (p procSet) anonPeaks(ctx context.Context, period time.Duration) func() map[string]int64 {
	out := map[string]int64{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			for group, pids := range p.pids {
				var sum int64
				for _, pid := range pids {
					sum += procStatusKiB(pid, "RssAnon:")
				}
				out[group] = max(out[group], sum)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() map[string]int64 {
		<-done
		return out
	}
}
