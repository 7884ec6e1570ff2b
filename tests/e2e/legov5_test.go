package e2e

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// legoV5 is the dns-persist-01 client built from lego v5's library
// (tests/legov5; .ci/run builds it and names it in HALLMARK_LEGO_V5). In
// CI a missing one fails; locally it skips with how to build it.
func legoV5(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HALLMARK_LEGO_V5"); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
		t.Fatal("HALLMARK_LEGO_V5 is not set: .ci/run builds tests/legov5 and sets it")
	}
	t.Skip("SKIPPING: set HALLMARK_LEGO_V5 to a build of tests/legov5 (cd tests/legov5 && go build)")
	return ""
}

// obtainWithLegoV5 has lego v5 register an account, lets publish write the
// record naming it, then has lego order names under the standing profile by
// dns-persist-01 (its resolver: the CA's test DNS), and returns the chain.
func obtainWithLegoV5(t *testing.T, ca *CA, publish func(accountURL string), names ...string) [][]byte {
	t.Helper()
	bin := legoV5(t)
	out := filepath.Join(t.TempDir(), "chain.pem")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-server", ca.BaseURL+"/directory", "-ca-cert", ca.Root,
		"-resolver", ca.DNS.Addr, "-issuer-domain-name", "hallmark.test", "-profile", "standing",
		"-domains", strings.Join(names, ","), "-out", out)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// lego logs to stdout too: the account is the line that names it.
	lines := bufio.NewScanner(stdout)
	var account string
	for account == "" && lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "account "); ok {
			account = a
		}
	}
	if account == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("lego v5 registered no account:\n%s", stderr.String())
	}
	var logged strings.Builder
	copied := make(chan struct{})
	go func() {
		for lines.Scan() {
			logged.WriteString(lines.Text() + "\n")
		}
		close(copied)
	}()
	publish(account)
	_, _ = io.WriteString(stdin, "published\n")
	err := cmd.Wait()
	<-copied
	if err != nil {
		t.Fatalf("lego v5: %v\n%s%s", err, logged.String(), stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var chain [][]byte
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		chain = append(chain, b.Bytes)
	}
	return chain
}
