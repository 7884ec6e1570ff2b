package jobs

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestBackoffGrowsWithJitterUpToMax(t *testing.T) {
	t.Parallel()
	b := backoff{base: time.Second, max: time.Minute}
	tests := []struct {
		attempt int
		lo, hi  time.Duration
	}{
		{0, 500 * time.Millisecond, time.Second}, // a rescued job that never started
		{1, 500 * time.Millisecond, time.Second},
		{2, time.Second, 2 * time.Second},
		{5, 8 * time.Second, 16 * time.Second},
		{7, 30 * time.Second, time.Minute}, // 64 s capped at 1 min
		{100, 30 * time.Second, time.Minute},
	}
	for _, tc := range tests {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.delay(tc.attempt)
			if d < tc.lo || d > tc.hi {
				t.Fatalf("attempt %d: delay %s outside [%s, %s]", tc.attempt, d, tc.lo, tc.hi)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Errorf("attempt %d: only %d distinct delays in 200; want jitter", tc.attempt, len(seen))
		}
	}
}

func TestCouldNotRunWrapsAndIsRecognised(t *testing.T) {
	t.Parallel()
	cause := errors.New("dial tcp 127.0.0.1:5432: connection refused")
	err := fmt.Errorf("loading challenge: %w", CouldNotRun(cause))
	if !IsCouldNotRun(err) || !errors.Is(err, cause) {
		t.Fatalf("CouldNotRun lost through wrapping: %v", err)
	}
	if IsCouldNotRun(cause) {
		t.Fatal("a plain error counts as CouldNotRun")
	}
	if CouldNotRun(nil) != nil {
		t.Fatal("CouldNotRun(nil) is not nil")
	}
}
