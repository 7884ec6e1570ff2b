package access

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// script writes an executable shell script and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hook.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func hookFacts() *Facts {
	return &Facts{Route: "new_order", Kind: KindOrder,
		Client:      Client{Peer: netip.MustParseAddr("127.0.0.2"), Addr: netip.MustParseAddr("192.0.2.7"), Forwarded: []string{"192.0.2.7"}},
		Account:     bound("kid1", "team-web"),
		Identifiers: dns("a.lab.test"), Profile: "default"}
}

// TestHookAnswers: stdout's JSON when there is any, else the exit status;
// anything else, and a hook that runs too long, is unknown.
func TestHookAnswers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name, body string
		want       Answer
		why        string
	}{
		{"exit 0", "exit 0", Yes, "exited 0"},
		{"exit 1", "echo 'not in the CMDB' >&2; exit 1", No, "not in the CMDB"},
		{"exit 3", "exit 3", Unknown, "exited 3"},
		{"json allow", `echo '{"answer":"allow","reason":"known host"}'`, Yes, "known host"},
		{"json deny despite exit 0", `echo '{"answer":"deny","reason":"retired"}'`, No, "retired"},
		{"json unknown", `echo '{"answer":"unknown","reason":"cmdb down"}'`, Unknown, "cmdb down"},
		{"other json", `echo '{"answer":"maybe"}'`, Unknown, `answered "maybe"`},
		{"not json", `echo yes`, Unknown, "wrote something other than"},
		{"killed by a signal", `kill -9 $$`, Unknown, "did not run to an exit"},
		{"sleeps past the timeout, with a child", "sleep 30 & sleep 30", Unknown, "did not answer within 300ms and was killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHookCheck("cmdb", Check{Command: []string{script(t, tc.body)}, TimeoutMS: 300})
			start := time.Now()
			got := h.check(ctx, hookFacts())
			if got.Answer != tc.want || !strings.Contains(got.Detail, tc.why) {
				t.Errorf("%s (%s), want %s (%s)", got.Answer, got.Detail, tc.want, tc.why)
			}
			// Not a timing assertion: a hook whose child survived would
			// hold its stdout open for 30 s.
			if time.Since(start) > 20*time.Second {
				t.Errorf("the hook's children outlived its timeout")
			}
		})
	}
	missing := newHookCheck("cmdb", Check{Command: []string{"/nonexistent/hook"}})
	if got := missing.check(ctx, hookFacts()); got.Answer != Unknown {
		t.Errorf("a hook that does not exist: %s (%s), want unknown", got.Answer, got.Detail)
	}
}

// TestHookInputAndEnvironment: the hook reads the request as JSON on
// stdin, and its environment is only what the configuration names.
func TestHookInputAndEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := "cat > " + dir + "/in.json; /usr/bin/env > " + dir + "/env.txt; exit 0"
	h := newHookCheck("cmdb", Check{Command: []string{script(t, body)}, Env: map[string]string{"CMDB_URL": "https://cmdb.test", "PATH": "/usr/bin:/bin"}})
	if got := h.check(context.Background(), hookFacts()); got.Answer != Yes {
		t.Fatalf("%s (%s)", got.Answer, got.Detail)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "in.json"))
	var in HookInput
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("stdin %q: %v", raw, err)
	}
	if in.Version != HookVersion || in.Check != "cmdb" || in.Route != "new_order" || in.Client.Address != "192.0.2.7" || in.Client.Peer != "127.0.0.2" ||
		in.Account == nil || in.Account.EABKeyID != "kid1" || in.Account.EABLabel != "team-web" ||
		len(in.Identifiers) != 1 || in.Identifiers[0].Value != "a.lab.test" || in.Profile != "default" {
		t.Errorf("the hook read %s", raw)
	}
	env, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	if !strings.Contains(string(env), "CMDB_URL=https://cmdb.test") {
		t.Errorf("the configured variable is missing: %s", env)
	}
	// With no env configured, the hook's environment is empty: sh may add
	// PWD (and SHLVL), nothing of the frontend's.
	bare := newHookCheck("cmdb", Check{Command: []string{script(t, body)}})
	if got := bare.check(context.Background(), hookFacts()); got.Answer != Yes {
		t.Fatalf("%s (%s)", got.Answer, got.Detail)
	}
	env, _ = os.ReadFile(filepath.Join(dir, "env.txt"))
	for _, l := range strings.Fields(string(env)) {
		if k, _, _ := strings.Cut(l, "="); k != "PWD" && k != "SHLVL" && k != "_" {
			t.Errorf("the hook's environment has %s", l)
		}
	}
}
