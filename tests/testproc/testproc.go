// Package testproc runs the outside programs tests start (Pebble, knotd)
// and collects what test processes print.
package testproc

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Start starts cmd with its output in the file at logPath, and kills it
// when the test ends, printing the log's tail if the test failed.
func Start(t testing.TB, name string, cmd *exec.Cmd, logPath string) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("---- %s log ----\n%s", name, b)
		}
	})
}

// Buffer is a bytes.Buffer that a process's output and the test's reads
// may share.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// WaitTCP waits up to 10 s for a program started by Start to accept TCP
// connections on addr, and fails the test with its log if it does not.
func WaitTCP(t testing.TB, name, addr, logPath string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s did not listen on %s: %v\n%s", name, addr, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreeAddr is a loopback port free for TCP and UDP when asked.
func FreeAddr(t testing.TB) string {
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		pc, err := net.ListenPacket("udp", addr)
		if err == nil {
			pc.Close()
			return addr
		}
	}
	t.Fatal("no loopback port free for both TCP and UDP")
	return ""
}
