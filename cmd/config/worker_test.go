package config_test

import (
	"strings"
	"testing"
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
