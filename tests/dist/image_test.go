package dist

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
	"github.com/hallmark-ca/hallmark/tests/testdns"
	"github.com/hallmark-ca/hallmark/tests/testproc"
)

// podman runs podman with its images and containers in dir, apart from
// the machine's. vfs storage works on any file system; runc and the
// cgroupfs manager work without systemd and on cgroup v1 (crun refuses
// this CI machine's hybrid hierarchy); limits at most the machine's
// own, as a container without CAP_SYS_RESOURCE cannot raise them.
func podman(dir string) []string {
	return []string{"podman", "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"),
		"--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--runtime", "runc"}
}

// imageConfig writes etc/hallmark.toml for the containers on free
// loopback ports, with the state in data (the image's uid owns it), and
// returns the frontend's and the worker's addresses and the http-01 port.
func imageConfig(t *testing.T, data, etc string) (listen, health string, httpPort int) {
	t.Helper()
	if err := os.Chown(data, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	dns := testdns.Start(t)
	port := func() int { return harness.FreePort(t) }
	listen, health, httpPort = fmt.Sprintf("127.0.0.1:%d", port()), fmt.Sprintf("127.0.0.1:%d", port()), port()
	conf := fmt.Sprintf(`[database]
url = "sqlite:/var/lib/hallmark/hallmark.db"
[server]
listen = %q
public_http_listen = "127.0.0.1:%d"
tls_cert = "/var/lib/hallmark/frontend.pem"
tls_key = "/var/lib/hallmark/frontend.key"
[worker]
health_listen = %q
[challenge]
resolvers = [%q]
http_port = %d
[ca]
dir = "/var/lib/hallmark/ca"
`, listen, port(), health, dns.Addr, httpPort)
	if err := os.WriteFile(filepath.Join(etc, "hallmark.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return listen, health, httpPort
}

// TestContainerImage builds the image with `make image` and runs the
// three binaries from it on the host's loopback against SQLite in a
// volume, until lego holds a certificate.
func TestContainerImage(t *testing.T) {
	gate(t)
	harness.RequireTool(t, "podman", "apt-get install podman")
	harness.RequireTool(t, "runc", "apt-get install runc")
	store := t.TempDir()
	pm := podman(store)
	t.Cleanup(func() { _ = exec.Command(pm[0], append(pm[1:], "rm", "--all", "--force")...).Run() })
	rel := makeDist(t)
	version := rel.version
	image := "hallmark:dist-test"
	start := time.Now()
	if out, err := makeCmd("image", "DIST="+rel.dir, "BUILD_DATE="+rel.date, "IMAGE="+image, "PODMAN="+strings.Join(pm, " ")).CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "make image: "+image) {
		t.Errorf("make image did not say what it built:\n%s", out)
	}
	t.Logf("make image took %v", time.Since(start).Round(time.Second))

	data, etc := t.TempDir(), t.TempDir()
	listen, health, httpPort := imageConfig(t, data, etc)
	podmanRun := func(name string, args ...string) *exec.Cmd {
		base := append(pm[1:], "run", "--rm", "--name", name, "--network", "host", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
			"-v", data+":/var/lib/hallmark", "-v", etc+":/etc/hallmark:ro", image)
		return exec.Command(pm[0], append(base, args...)...)
	}
	for _, bin := range []string{"hallmark", "hallmark-frontend", "hallmark-worker"} {
		out, err := podmanRun("version-"+bin, bin, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), bin+" "+version+" (commit ") {
			t.Fatalf("%s version in the image: %v\n%s", bin, err, out)
		}
	}
	for _, args := range [][]string{{"hallmark", "migrate"}, {"hallmark-worker", "ca", "init", "--tls-cert", "/var/lib/hallmark/frontend.pem",
		"--tls-key", "/var/lib/hallmark/frontend.key", "--tls-names", "127.0.0.1"}} {
		if out, err := podmanRun("setup", args...).CombinedOutput(); err != nil {
			t.Fatalf("%v in the image: %v\n%s", args, err, out)
		}
	}
	procs := map[string]*service{}
	for _, bin := range []string{"hallmark-worker", "hallmark-frontend"} {
		s := &service{name: bin, cmd: podmanRun(bin, bin), out: &testproc.Buffer{}, done: make(chan struct{})}
		s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
		if err := s.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = s.cmd.Wait(); close(s.done) }()
		t.Cleanup(func() { s.stop(t) }) // podman run passes SIGTERM on to the container
		procs[bin] = s
	}
	root := filepath.Join(data, "ca", "root.pem")
	deadline := time.Now().Add(60 * time.Second)
	if !harness.WaitOK(http.DefaultClient, "http://"+health+"/healthz", deadline) ||
		!harness.WaitOK(harness.HTTPClient(t, root), "https://"+listen+"/directory", deadline) {
		t.Fatalf("the CA in containers did not answer within 60 s\nworker:\n%s\nfrontend:\n%s",
			harness.Tail(procs["hallmark-worker"].out.String(), 3000), harness.Tail(procs["hallmark-frontend"].out.String(), 3000))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lego := harness.Lego{Bin: "lego", Directory: "https://" + listen + "/directory", Root: root, Email: "image@example.com", Path: t.TempDir()}
	if out, err := lego.Run(ctx, "--domains", "image.localhost", "--http", "--http.port", fmt.Sprintf("127.0.0.1:%d", httpPort), "run"); err != nil {
		t.Fatalf("lego: %v\n%s\nworker:\n%s", err, out, harness.Tail(procs["hallmark-worker"].out.String(), 3000))
	}
	harness.ReadCert(t, filepath.Join(lego.Path, "certificates", "image.localhost.crt"))
	for _, s := range procs {
		s.stop(t)
	}
}
