package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// FreePort returns a loopback TCP port reserved for this test until it ends.
//
// A port the kernel hands out for "127.0.0.1:0" comes from the ephemeral
// range, and closing the listener gives it back: any outgoing connection in
// any process (a PostgreSQL pool, lego, certbot) may take it as its local
// port before the test's own server binds it. CI lost a tls-alpn-01 run that
// way ("bind: address already in use" in lego, minutes after the port was
// picked). So the port comes from below the ephemeral range, where the
// kernel never assigns ports on its own, and a lock file reserves it against
// every other test process on the machine for as long as this test runs.
func FreePort(t *testing.T) int {
	t.Helper()
	lo, hi := reservablePorts()
	dir := filepath.Join(os.TempDir(), "hallmark-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 2000 {
		port := lo + rand.IntN(hi-lo+1)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		// The lock lives as long as the open file; os.OpenFile sets
		// close-on-exec, so child processes do not hold it.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil { // a service on this machine owns it
			f.Close()
			continue
		}
		ln.Close()
		t.Cleanup(func() { f.Close() })
		return port
	}
	t.Fatalf("no free loopback port in %d-%d after 2000 tries", lo, hi)
	return 0
}

// reservablePorts is the range below the kernel's ephemeral ports
// (net.ipv4.ip_local_port_range), where only explicit binds land.
func reservablePorts() (lo, hi int) {
	lo, hi = 16384, 32767
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return lo, hi
	}
	start, err := strconv.Atoi(f[0])
	if err != nil || start <= 4096 {
		return lo, hi
	}
	return start / 2, start - 1
}
