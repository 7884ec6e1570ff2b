package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// TestWorkerConcurrency: validations run many more at once than the other
// jobs unless configured otherwise, and neither may be switched off.
func TestWorkerConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body        string
		jobs, validations int
		wantErr           string
	}{
		{"defaults", ``, 8, 100, ""},
		{"set", "[worker]\nconcurrency = 2\nvalidation_concurrency = 500\n", 2, 500, ""},
		{"no validations", "[worker]\nvalidation_concurrency = 0\n", 0, 0, "worker.validation_concurrency: must be at least 1"},
		{"no jobs", "[worker]\nconcurrency = -1\n", 0, 0, "worker.concurrency: must be at least 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Worker.Concurrency != tc.jobs || cfg.Worker.ValidationConcurrency != tc.validations {
				t.Fatalf("concurrency %d, validation_concurrency %d; want %d, %d",
					cfg.Worker.Concurrency, cfg.Worker.ValidationConcurrency, tc.jobs, tc.validations)
			}
		})
	}
}

// TestValidationAccountShare: one account may hold a tenth of a worker's
// validation slots unless configured otherwise; the share is a fraction
// above 0 and at most 1 (every slot).
func TestValidationAccountShare(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		share      float64
		wantErr    string
	}{
		{"default", ``, 0.1, ""},
		{"set", "[worker]\nvalidation_account_share = 0.25\n", 0.25, ""},
		{"every slot", "[worker]\nvalidation_account_share = 1.0\n", 1, ""},
		{"none", "[worker]\nvalidation_account_share = 0.0\n", 0, "worker.validation_account_share: must be more than 0 and at most 1"},
		{"over one", "[worker]\nvalidation_account_share = 1.5\n", 0, "worker.validation_account_share: must be more than 0 and at most 1"},
		{"a slot count", "[worker]\nvalidation_account_share = 10\n", 0, "worker.validation_account_share: must be more than 0 and at most 1"},
		{"negative", "[worker]\nvalidation_account_share = -0.1\n", 0, "worker.validation_account_share: must be more than 0 and at most 1"},
		{"nan", "[worker]\nvalidation_account_share = nan\n", 0, "worker.validation_account_share: must be more than 0 and at most 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tc.body)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Worker.ValidationAccountShare != tc.share {
				t.Fatalf("validation_account_share %g, want %g", cfg.Worker.ValidationAccountShare, tc.share)
			}
		})
	}
}

// TestWorkerNeedsResolvers: the worker never uses the system's resolver,
// so without challenge.resolvers it could neither validate nor check CAA.
// The worker's configuration check (LoadWorker, ValidateWorker: its
// check-config and its start) refuses that, naming the key, with Validate's
// own problems in the same report; Load, which the frontend and the CLI
// use, does not ask for resolvers they never use.
func TestWorkerNeedsResolvers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		worker     []string // what LoadWorker's error must name; none: valid
		load       []string // what Load's error must name; none: valid
	}{
		{"no resolvers", ``, []string{"challenge.resolvers: the worker needs at least one DNS resolver"}, nil},
		{"empty list", "[challenge]\nresolvers = []\n", []string{"challenge.resolvers:"}, nil},
		{"resolvers", "[challenge]\nresolvers = [\"10.0.0.53:53\", \"[2001:db8::53]:5353\"]\n", nil, nil},
		{"no port", "[challenge]\nresolvers = [\"10.0.0.53\"]\n", []string{`challenge.resolvers: "10.0.0.53" is not host:port`}, nil},
		{"port out of range", "[challenge]\nresolvers = [\"10.0.0.53:0\"]\n", []string{`"10.0.0.53:0" is not host:port`}, nil},
		{"reported with the others", "[worker]\nconcurrency = 0\n",
			[]string{"worker.concurrency: must be at least 1", "challenge.resolvers:"}, []string{"worker.concurrency"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "hallmark.toml")
			if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, check := range []struct {
				what string
				load func(string) (config.Config, error)
				want []string
			}{{"LoadWorker", config.LoadWorker, tc.worker}, {"Load", config.Load, tc.load}} {
				c, err := check.load(path)
				if len(check.want) == 0 {
					if err != nil {
						t.Fatalf("%s refused it: %v", check.what, err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s accepted it (resolvers %q)", check.what, c.Challenge.Resolvers)
				}
				for _, w := range check.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not name %q", check.what, err, w)
					}
				}
			}
			if tc.load == nil {
				c, _ := config.Load(path)
				if err := c.ValidateWorker(); (err == nil) != (len(tc.worker) == 0) {
					t.Errorf("ValidateWorker: %v, want an error: %v", err, len(tc.worker) > 0)
				}
			}
		})
	}
}
