package harness

import (
	"fmt"
	"net"
	"testing"
)

// TestFreePortReserves: ports handed out to running tests are distinct,
// outside the kernel's ephemeral range, and bindable.
func TestFreePortReserves(t *testing.T) {
	lo, hi := reservablePorts()
	seen := map[int]bool{}
	for range 300 {
		p := FreePort(t)
		if p < lo || p > hi {
			t.Fatalf("port %d is outside %d-%d", p, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice while its first test still runs", p)
		}
		seen[p] = true
	}
	for p := range seen {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("reserved port %d cannot be bound: %v", p, err)
		}
		ln.Close()
		break
	}
}
