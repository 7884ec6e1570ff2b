package testdb

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Link is a TCP relay on loopback between a test's store and its
// PostgreSQL database, which the test can cut and mend: a database
// outage as the store meets it (connections reset mid-query, new ones
// refused) without stopping the machine's shared server.
type Link struct {
	t      testing.TB
	addr   string // the relay's own address, kept across a cut
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
}

// Cuttable starts a Link to the database at dbURL and returns it with the
// URL to reach the database through it.
func Cuttable(t testing.TB, dbURL string) (*Link, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parsing the database URL: %v", err)
	}
	l := &Link{t: t, addr: "127.0.0.1:0", target: u.Host, conns: map[net.Conn]struct{}{}}
	l.Mend()
	l.addr = l.ln.Addr().String()
	u.Host = l.addr
	t.Cleanup(l.Cut)
	return l, u.String()
}

// Cut resets every relayed connection and stops accepting: the store's
// connections fail mid-use and new ones are refused.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		_ = l.ln.Close()
		l.ln = nil
	}
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, as when the server dies
		}
		_ = c.Close()
		delete(l.conns, c)
	}
}

// Mend accepts connections again, on the same address.
func (l *Link) Mend() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ln != nil {
		return
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		l.t.Fatalf("listening on %s for the database link: %v", l.addr, err)
	}
	l.ln = ln
	go l.accept(ln)
}

func (l *Link) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		l.mu.Lock()
		if l.ln != ln { // cut meanwhile
			l.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			return
		}
		l.conns[c], l.conns[up] = struct{}{}, struct{}{}
		l.mu.Unlock()
		go l.pipe(c, up)
		go l.pipe(up, c)
	}
}

// pipe copies one direction; when it ends, both sides close.
func (l *Link) pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	l.mu.Lock()
	delete(l.conns, dst)
	delete(l.conns, src)
	l.mu.Unlock()
	_ = dst.Close()
	_ = src.Close()
}
