package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// devDNS is the tiny authoritative DNS server of `hallmark up`, on UDP and
// TCP: every name under .localhost (RFC 6761) has A 127.0.0.1 (IPv4 only,
// so the worker dials what a client's listener on 0.0.0.0 serves), and the
// records of the zone file (hallmark-data/dev.zone, RFC 1035 syntax, read
// again whenever it changes) answer beside them: a record there wins for
// its name and type. Everything else is NXDOMAIN. It lets the worker
// validate http-01, tls-alpn-01 and the DNS methods on a machine with no
// network, through the same resolver code it uses in production.
type devDNS struct {
	zonePath string
	log      io.Writer // where a zone file that does not parse is reported

	mu      sync.Mutex
	stamp   string              // the zone file's size and time when last read
	bad     string              // the stamp of a file that did not parse (reported once)
	records map[string][]dns.RR // by canonical owner name
}

// startDevDNS serves on addr, UDP and TCP, until the servers are shut down.
func startDevDNS(addr, zonePath string, log io.Writer) ([]*dns.Server, error) {
	d := &devDNS{zonePath: zonePath, log: log}
	d.zone() // report a broken file at once, not at the first question
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("starting the dev DNS server on %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("starting the dev DNS server on %s (TCP): %w", addr, err)
	}
	servers := []*dns.Server{{PacketConn: pc, Handler: d}, {Listener: ln, Handler: d}}
	for i, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			for _, s := range servers[:i] {
				_ = s.Shutdown()
			}
			return nil, fmt.Errorf("the dev DNS server on %s did not start", addr)
		}
	}
	return servers, nil
}

// zone returns the zone file's records, reading the file again when its
// size or modification time changed. A file that does not parse is
// reported and the records read before are kept; a missing file has none.
func (d *devDNS) zone() map[string][]dns.RR {
	d.mu.Lock()
	defer d.mu.Unlock()
	fi, err := os.Stat(d.zonePath)
	if errors.Is(err, os.ErrNotExist) {
		d.stamp, d.records = "", nil
		return nil
	}
	stamp := ""
	if err == nil {
		stamp = fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
	}
	if err == nil && (stamp == d.stamp || stamp == d.bad) {
		return d.records
	}
	records, err := readZone(d.zonePath)
	if err != nil {
		d.bad = stamp
		fmt.Fprintf(d.log, "dev DNS: %v; still serving the records read before\n", err)
		return d.records
	}
	d.stamp, d.records = stamp, records
	return records
}

// readZone parses an RFC 1035 zone file; names are relative to
// "localhost." until a $ORIGIN says otherwise.
func readZone(path string) (map[string][]dns.RR, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zp := dns.NewZoneParser(f, "localhost.", path)
	zp.SetDefaultTTL(60)
	records := map[string][]dns.RR{}
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		owner := dns.CanonicalName(rr.Header().Name)
		records[owner] = append(records[owner], rr)
	}
	if err := zp.Err(); err != nil {
		return nil, err // names the file and the line
	}
	return records, nil
}

// ServeDNS answers one question: the zone file's records of its name and
// type (or a CNAME there), else A 127.0.0.1 for a .localhost name, else
// NODATA for a name that exists, else NXDOMAIN.
func (d *devDNS) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	if len(req.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := dns.CanonicalName(q.Name)
	local := name == "localhost." || strings.HasSuffix(name, ".localhost.")
	owned := d.zone()[name]
	for _, rr := range owned {
		if t := rr.Header().Rrtype; t == q.Qtype || t == dns.TypeCNAME && q.Qtype != dns.TypeCNAME {
			m.Answer = append(m.Answer, rr)
		}
	}
	switch {
	case len(m.Answer) > 0:
	case local && q.Qtype == dns.TypeA:
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A: net.IPv4(127, 0, 0, 1)})
	case local || len(owned) > 0:
		// NODATA: the name exists without this type.
	default:
		m.Rcode = dns.RcodeNameError
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	_ = w.WriteMsg(m)
}
