package workerconf

import (
	"strings"
	"testing"
)

// TestMaxFailuresFor is the BR §3.2.2.9 table of how many remote
// perspectives may fail to corroborate.
func TestMaxFailuresFor(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 3: 1, 5: 1, 6: 2, 9: 2} {
		if got := MaxFailuresFor(n); got != want {
			t.Errorf("MaxFailuresFor(%d) = %d, want %d", n, got, want)
		}
	}
	p := DefaultPerspectives()
	p.Names = []string{"a", "b", "c"}
	if p.Allowed() != 1 {
		t.Errorf("three perspectives by the table allow %d failures, want 1", p.Allowed())
	}
	p.MaxFailures = 0
	if p.Allowed() != 0 {
		t.Errorf("max_failures = 0 allows %d", p.Allowed())
	}
}

// TestPerspectivesValidate names the key of each problem.
func TestPerspectivesValidate(t *testing.T) {
	if err := DefaultPerspectives().Validate(); err != nil {
		t.Fatalf("the default: %v", err)
	}
	for _, c := range []struct {
		p    Perspectives
		want string
	}{
		{Perspectives{Names: []string{"primary"}, MaxFailures: -1, DeadlineMS: 1000}, "challenge.perspectives.names"},
		{Perspectives{Names: []string{"a", "a"}, MaxFailures: -1, DeadlineMS: 1000}, "named twice"},
		{Perspectives{Names: []string{"Bad Name"}, MaxFailures: -1, DeadlineMS: 1000}, "challenge.perspectives.names"},
		{Perspectives{Names: []string{"a", "b"}, MaxFailures: 2, DeadlineMS: 1000}, "challenge.perspectives.max_failures"},
		{Perspectives{Names: []string{"a"}, MaxFailures: -1, DeadlineMS: 10}, "challenge.perspectives.deadline_ms"},
	} {
		if err := c.p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want a problem naming %s", c.p, err, c.want)
		}
	}
	w := DefaultWorker()
	w.Perspective = "primary"
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "worker.perspective") {
		t.Errorf("worker.perspective = primary: %v", err)
	}
}
