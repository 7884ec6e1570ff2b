package config_test

import (
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// TestDeployedExample: the configuration the Debian package installs as
// /etc/hallmark/hallmark.toml passes every binary's checks, the worker's
// included, and puts the state where the units let it write.
func TestDeployedExample(t *testing.T) {
	t.Parallel()
	c, err := config.LoadWorker("../../deploy/hallmark.toml")
	if err != nil {
		t.Fatalf("deploy/hallmark.toml: %v", err)
	}
	for key, path := range map[string]string{"database.url": strings.TrimPrefix(c.Database.URL, "sqlite:"), "ca.dir": c.CA.Dir,
		"server.tls_key": c.Server.TLSKey} {
		if !strings.HasPrefix(path, "/var/lib/hallmark/") {
			t.Errorf("%s = %s, outside /var/lib/hallmark, the units' one writable directory", key, path)
		}
	}
}
