package config

import (
	"strings"
	"testing"
)

// TestPprofListenLoopbackOnly: profiles expose process memory, so the
// listeners are refused anywhere but loopback, naming the key.
func TestPprofListenLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		server, worker string
		wantErr        string
	}{
		{"", "", ""},
		{"127.0.0.1:6060", "[::1]:6061", ""},
		{"0.0.0.0:6060", "", "server.pprof_listen"},
		{"", "10.0.0.1:6061", "worker.pprof_listen"},
		{"localhost:6060", "", "server.pprof_listen"},
	} {
		c := Default()
		c.derive()
		c.Server.PprofListen, c.Worker.PprofListen = tc.server, tc.worker
		err := c.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q/%q: %v", tc.server, tc.worker, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q/%q: error %v, want one naming %s", tc.server, tc.worker, err, tc.wantErr)
		}
	}
}
