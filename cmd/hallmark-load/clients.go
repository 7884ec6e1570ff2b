package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// acmeTool is a real ACME client the clients command times: how to run it
// for one name against one target, and where it leaves the certificate.
type acmeTool struct {
	Name string
	Bin  string
	// command is the invocation issuing name against t, keeping its
	// account and certificates under dir and answering http-01 itself on
	// 127.0.0.1:port; rootFile is t's trust anchor.
	command func(ctx context.Context, bin string, t *target, rootFile, dir, name string, port int) *exec.Cmd
	// certFile is where a successful run left name's certificate.
	certFile func(dir, name string) string
}

var acmeTools = map[string]acmeTool{
	"lego": {
		Name: "lego",
		command: func(ctx context.Context, bin string, t *target, rootFile, dir, name string, port int) *exec.Cmd {
			cmd := exec.CommandContext(ctx, bin, "--server", t.Directory, "--email", "load@hallmark.test", "--accept-tos",
				"--path", dir, "--key-type", "ec256", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", port),
				"--domains", name, "run")
			cmd.Env = append(os.Environ(), "LEGO_CA_CERTIFICATES="+rootFile)
			return cmd
		},
		certFile: func(dir, name string) string { return filepath.Join(dir, "certificates", name+".crt") },
	},
	"certbot": {
		Name: "certbot",
		command: func(ctx context.Context, bin string, t *target, rootFile, dir, name string, port int) *exec.Cmd {
			cmd := exec.CommandContext(ctx, bin, "certonly", "-n", "--server", t.Directory,
				"--config-dir", filepath.Join(dir, "config"), "--work-dir", filepath.Join(dir, "work"),
				"--logs-dir", filepath.Join(dir, "logs"), "--agree-tos", "--register-unsafely-without-email",
				"--standalone", "--preferred-challenges", "http", "--http-01-port", fmt.Sprint(port),
				"--http-01-address", "127.0.0.1", "-d", name)
			// certbot checks the server with requests, which reads its CA
			// bundle from REQUESTS_CA_BUNDLE.
			cmd.Env = append(os.Environ(), "REQUESTS_CA_BUNDLE="+rootFile)
			return cmd
		},
		certFile: func(dir, name string) string { return filepath.Join(dir, "config", "live", name, "fullchain.pem") },
	},
}

// clientTimes is one client's timed issuances against one target.
type clientTimes struct {
	Target, Client string
	Walls          []time.Duration
	Failures       int
	FirstFailure   string
}

func cmdClients(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("clients", flag.ExitOnError)
	var sf serverFlags
	sf.register(fs, "hallmark-sqlite,hallmark-postgres,step-ca,pebble")
	names := fs.String("clients", "lego,certbot", "comma-separated: lego, certbot")
	count := fs.Int("count", 10, "certificates each client gets from each target, one after another, each a run of the client")
	timeout := fs.Duration("timeout", 2*time.Minute, "stop one run of a client after this long")
	lego := fs.String("lego", "lego", "the lego binary (Debian's: apt-get install lego)")
	certbot := fs.String("certbot", "certbot", "the certbot binary (Debian's: apt-get install certbot)")
	_ = fs.Parse(args)
	var tools []acmeTool
	for _, n := range splitList(*names) {
		tool, ok := acmeTools[n]
		if !ok {
			return fmt.Errorf("--clients: unknown client %q (lego, certbot)", n)
		}
		tool.Bin = map[string]string{"lego": *lego, "certbot": *certbot}[n]
		if _, err := exec.LookPath(tool.Bin); err != nil {
			return fmt.Errorf("--clients %s: %w (apt-get install %s)", n, err, n)
		}
		tools = append(tools, tool)
	}
	work, err := os.MkdirTemp("", "hallmark-clients-")
	if err != nil {
		return err
	}
	if !sf.keep {
		defer os.RemoveAll(work)
	}
	// The generator's DNS server gives the CAs every name as 127.0.0.1;
	// each client serves http-01 itself, on the port the CAs validate on.
	resp, err := startResponders("127.0.0.1:0", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer resp.Close()
	env := sf.env(work, resp)
	if env.HTTPPort, err = freePort(); err != nil {
		return err
	}
	var all []*clientTimes
	var failures []error
	for _, tg := range splitList(sf.targets) {
		if why := env.missing(tg); why != "" {
			fmt.Fprintln(os.Stderr, why)
			continue
		}
		rows, err := clientsAgainst(ctx, env, tg, tools, *count, *timeout)
		all = append(all, rows...)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !isPeer(tg) {
			failures = append(failures, err)
		}
	}
	printClientTable(os.Stdout, all)
	return errors.Join(failures...)
}

// clientsAgainst starts tg fresh and runs each tool count+1 times against
// it, one run after another; the first run of each, which registers its
// account, is not timed. err says a run failed or tg did not start.
func clientsAgainst(ctx context.Context, env *benchEnv, tg string, tools []acmeTool, count int, timeout time.Duration) ([]*clientTimes, error) {
	t, err := env.start(ctx, tg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s FAILED to start: %v\n", tg, err)
		var rows []*clientTimes
		for _, tool := range tools {
			rows = append(rows, &clientTimes{Target: tg, Client: tool.Name, Failures: count, FirstFailure: err.Error()})
		}
		return rows, fmt.Errorf("%s: %w", tg, err)
	}
	defer t.stop()
	rootFile := filepath.Join(env.WorkDir, fmt.Sprintf("%s-root.pem", tg))
	if err := os.WriteFile(rootFile, t.RootPEM, 0o644); err != nil {
		return nil, err
	}
	var rows []*clientTimes
	var failed error
	for _, tool := range tools {
		dir, err := os.MkdirTemp(env.WorkDir, tool.Name+"-")
		if err != nil {
			return rows, err
		}
		ct := &clientTimes{Target: t.Label, Client: tool.Name}
		rows = append(rows, ct)
		prefix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
		for i := 0; i <= count && ctx.Err() == nil; i++ {
			name := fmt.Sprintf("c%d-%s.%s.load.test", i, prefix, tool.Name)
			took, err := runTool(ctx, tool, t, rootFile, dir, name, env.HTTPPort, timeout)
			switch {
			case err != nil:
				ct.Failures++
				if ct.FirstFailure == "" {
					ct.FirstFailure = err.Error()
				}
				fmt.Fprintf(os.Stderr, "%s against %s, %s: FAILED after %.2fs: %v\n", tool.Name, t.Label, name, took.Seconds(), err)
				failed = fmt.Errorf("%s against %s: %w", tool.Name, t.Label, err)
			case i == 0:
				fmt.Printf("%s against %s: %.2fs for the first certificate, with the account (not timed)\n", tool.Name, t.Label, took.Seconds())
			default:
				ct.Walls = append(ct.Walls, took)
				fmt.Printf("%s against %s: %.2fs\n", tool.Name, t.Label, took.Seconds())
			}
		}
	}
	return rows, failed
}

// runTool runs tool once for name and times it, from the process's start
// to its exit; it fails unless the tool exits 0 and left the certificate.
func runTool(ctx context.Context, tool acmeTool, t *target, rootFile, dir, name string, port int, timeout time.Duration) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := tool.command(rctx, tool.Bin, t, rootFile, dir, name, port)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if rctx.Err() != nil {
		return took, fmt.Errorf("no answer within --timeout %s: %s", timeout, tail(out, 600))
	}
	if err != nil {
		return took, fmt.Errorf("%v: %s", err, tail(out, 600))
	}
	if _, err := os.Stat(tool.certFile(dir, name)); err != nil {
		return took, fmt.Errorf("exited 0 but left no certificate: %w", err)
	}
	return took, nil
}

// median is the middle of ds, the mean of the two middle ones for an
// even count.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printClientTable(w io.Writer, rows []*clientTimes) {
	fmt.Fprintln(w, "\n| target | client | n ok | median s | min s | max s | failures |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		lo, hi := "—", "—"
		med := "—"
		if len(r.Walls) > 0 {
			s := append([]time.Duration(nil), r.Walls...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			lo, hi = fmt.Sprintf("%.2f", s[0].Seconds()), fmt.Sprintf("%.2f", s[len(s)-1].Seconds())
			med = fmt.Sprintf("%.2f", median(s).Seconds())
		}
		fail := fmt.Sprint(r.Failures)
		if r.FirstFailure != "" {
			fail += fmt.Sprintf(" (first: %.120s)", strings.Join(strings.Fields(r.FirstFailure), " "))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s |\n", r.Target, r.Client, len(r.Walls), med, lo, hi, fail)
	}
}
