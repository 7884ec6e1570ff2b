package process

import (
	"runtime/debug"
	"testing"
)

// TestTuneGC: the frontend and worker collect at DefaultGOGC unless the
// operator set GOGC, whose value Go's runtime applied at start and
// TuneGC leaves alone.
func TestTuneGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, tc := range []struct {
		name, env string
		want      int
	}{
		{"GOGC unset", "", DefaultGOGC},
		{"GOGC set by the operator", "150", 100}, // the runtime read it at start; here that is the 100 set above
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", tc.env)
			debug.SetGCPercent(100)
			got := TuneGC()
			if cur := debug.SetGCPercent(100); cur != tc.want || got != tc.want {
				t.Errorf("TuneGC() = %d and the target is %d, want %d", got, cur, tc.want)
			}
		})
	}
}
