package pkcs11_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The whole test binary shares one SoftHSM2 configuration (the module reads
// SOFTHSM2_CONF once per initialisation, and it is process-wide): TestMain
// initialises a token in a temporary directory, and each test uses its own
// key label on it.
var hsm struct {
	module   string
	tokenDir string
	skip     string
}

const (
	tokenLabel = "hallmark-test"
	userPIN    = "123456"
)

func setupSoftHSM() (cleanup func(), err error) {
	hsm.module = "/usr/lib/softhsm/libsofthsm2.so"
	if p := os.Getenv("HALLMARK_PKCS11_MODULE"); p != "" {
		hsm.module = p
	}
	util, lerr := exec.LookPath("softhsm2-util")
	if _, serr := os.Stat(hsm.module); lerr != nil || serr != nil {
		hsm.skip = "SoftHSM2 is not installed (apt-get install softhsm2): softhsm2-util and " + hsm.module + " are needed"
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "hallmark-softhsm-")
	if err != nil {
		return nil, err
	}
	hsm.tokenDir = filepath.Join(dir, "tokens")
	if err := os.Mkdir(hsm.tokenDir, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n", hsm.tokenDir)), 0o600); err != nil {
		return nil, err
	}
	os.Setenv("SOFTHSM2_CONF", conf)
	out, err := exec.Command(util, "--init-token", "--free", "--label", tokenLabel, "--pin", userPIN, "--so-pin", "654321").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("softhsm2-util --init-token: %v\n%s", err, out)
	}
	return func() { os.RemoveAll(dir) }, nil
}

func TestMain(m *testing.M) {
	cleanup, err := setupSoftHSM()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// needHSM skips loudly without SoftHSM2, or fails in CI.
func needHSM(tb testing.TB) {
	tb.Helper()
	if hsm.skip == "" {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("HALLMARK_REQUIRE_TOOLS") == "1" {
		tb.Fatal(hsm.skip)
	}
	tb.Skip("SKIPPING: " + hsm.skip)
}
