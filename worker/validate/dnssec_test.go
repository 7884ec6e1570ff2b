package validate

import (
	"context"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
	"github.com/hallmark-ca/hallmark/tests/signeddns"
	"github.com/hallmark-ca/hallmark/tests/unbound"
	"github.com/hallmark-ca/hallmark/worker/workerconf"
)

// dnssecWorld is a validating resolver (unbound) in front of an
// authoritative server for test. (unsigned), secure.test. (signed, and
// unbound's trust anchor) and plain.test. (unsigned: insecure).
//
//	ok.secure.test         _acme-challenge TXT good               secure
//	forged.secure.test     _acme-challenge TXT good, expired sigs bogus (the challenge)
//	nocaa.secure.test      no CAA, its denial's sigs expired      bogus (the CAA climb's first level)
//	badcaa.secure.test     CAA issue hallmark.test, expired sigs  bogus (the CAA RRset)
//	ok.plain.test          _acme-challenge TXT good               insecure
//
// secure.test.'s apex holds CAA issue hallmark.test, so a climb from a
// secure name ends in the signed zone.
type dnssecWorld struct {
	withEDE, withoutEDE string // the resolver's address, with and without Extended DNS Errors
	auth                string
}

func newDNSSECWorld(t *testing.T) dnssecWorld {
	t.Helper()
	good := txtDigest(testKeyAuth)
	secure := signeddns.NewZone("secure.test.", true)
	secure.Add(`@ CAA 0 issue "`+testCAA+`"`,
		"ok A 127.0.0.1", `_acme-challenge.ok TXT "`+good+`"`,
		"forged A 127.0.0.1", `_acme-challenge.forged TXT "`+good+`"`,
		"nocaa A 127.0.0.1", `_acme-challenge.nocaa TXT "`+good+`"`,
		"badcaa A 127.0.0.1", `badcaa CAA 0 issue "`+testCAA+`"`, `_acme-challenge.badcaa TXT "`+good+`"`)
	secure.Bogus("_acme-challenge.forged.secure.test.")
	plain := signeddns.NewZone("plain.test.", false)
	plain.Add("ok A 127.0.0.1", `_acme-challenge.ok TXT "`+good+`"`)
	parent := signeddns.NewZone("test.", false)
	auth := signeddns.Start(t, parent, secure, plain)
	cfg := unbound.Config{
		Stubs:        map[string]string{"test.": auth.Addr, "secure.test.": auth.Addr, "plain.test.": auth.Addr},
		TrustAnchors: []string{secure.TrustAnchor()},
	}
	w := dnssecWorld{auth: auth.Addr, withEDE: unbound.Start(t, cfg).Addr}
	cfg.NoEDE = true
	w.withoutEDE = unbound.Start(t, cfg).Addr
	// Marked after the resolvers start: nothing asked about these names yet.
	secure.Bogus("nocaa.secure.test.")
	secure.Bogus("badcaa.secure.test.")
	return w
}

// validator asks resolvers in order, in mode.
func (w dnssecWorld) validator(mode string, resolvers ...string) *Validator {
	return New(Config{Resolvers: resolvers, HTTPPort: closedPort(), HTTPSPort: closedPort(), TLSALPNPort: closedPort(),
		Timeout: 10e9, CAAIdentities: []string{testCAA}, DNSSEC: mode})
}

func dns01Request(name string) Request {
	return Request{Identifier: dnsID(name), Type: acme.ChallengeDNS01, Token: testToken, KeyAuthorization: testKeyAuth, AccountURI: testAccount}
}

// TestDNSSECValidation runs dns-01 with its CAA check, and the CAA recheck
// at issuance, through real unbound: a secure answer passes in every mode,
// an insecure one unless challenge.dnssec is require, a bogus one never,
// whether the resolver names the failure with an Extended DNS Error or
// answers a bare SERVFAIL (the worker then asks again with checking
// disabled). A bogus CAA answer, a forged record or a denial, blocks
// issuance: never read as "no CAA".
func TestDNSSECValidation(t *testing.T) {
	w := newDNSSECWorld(t)
	const (
		bogus    = "DNSSEC validation failed"
		insecure = "accepts only DNSSEC-validated answers"
	)
	for _, c := range []struct {
		name     string
		mode     string
		noEDE    bool
		want     acme.ProblemType
		mentions []string
	}{
		{name: "ok.secure.test", mode: workerconf.DNSSECCheck},
		{name: "ok.secure.test", mode: workerconf.DNSSECRequire},
		{name: "ok.secure.test", mode: workerconf.DNSSECOff},
		{name: "ok.plain.test", mode: workerconf.DNSSECCheck},
		{name: "ok.plain.test", mode: ""}, // the default is check
		{name: "ok.plain.test", mode: workerconf.DNSSECRequire, want: acme.ProblemDNS,
			mentions: []string{"answer not DNSSEC-validated looking up TXT for _acme-challenge.ok.plain.test", insecure, "no AD bit"}},
		{name: "forged.secure.test", mode: workerconf.DNSSECCheck, want: acme.ProblemDNS,
			mentions: []string{bogus, "extended DNS error 7, Signature Expired) looking up TXT for _acme-challenge.forged.secure.test: the validating resolver found"}},
		{name: "forged.secure.test", mode: workerconf.DNSSECRequire, noEDE: true, want: acme.ProblemDNS,
			mentions: []string{bogus, "checking disabled", "TXT for _acme-challenge.forged.secure.test"}},
		{name: "nocaa.secure.test", mode: workerconf.DNSSECCheck, want: acme.ProblemDNS,
			mentions: []string{"While checking CAA for nocaa.secure.test", bogus, "CAA for nocaa.secure.test", "issuance is not permitted"}},
		{name: "badcaa.secure.test", mode: workerconf.DNSSECCheck, noEDE: true, want: acme.ProblemDNS,
			mentions: []string{"While checking CAA for badcaa.secure.test", bogus, "issuance is not permitted"}},
	} {
		res := w.withEDE
		if c.noEDE {
			res = w.withoutEDE
		}
		t.Run(c.name+"/"+c.mode, func(t *testing.T) {
			v := w.validator(c.mode, res)
			checkResult(t, v.Validate(context.Background(), dns01Request(c.name)), c.want, c.mentions...)
			// The recheck at issuance reads CAA alone.
			p, err := v.CheckCAA(context.Background(), dnsID(c.name), false, acme.ChallengeDNS01, testAccount)
			if err != nil {
				t.Fatalf("CheckCAA: no verdict: %v", err)
			}
			switch {
			case c.name == "nocaa.secure.test" || c.name == "badcaa.secure.test":
				checkProblem(t, p, acme.ProblemDNS, bogus, "issuance is not permitted")
			case c.mode == workerconf.DNSSECRequire && c.name == "ok.plain.test":
				checkProblem(t, p, acme.ProblemDNS, insecure)
			default:
				checkProblem(t, p, "")
			}
		})
	}
}

// TestDNSSECBogusAsksNoOtherResolver: after a validating resolver found
// the CAA denial bogus, a second resolver that would say "no CAA" (it
// does not validate) is not asked, so issuance stays blocked. With
// challenge.dnssec off the bogus SERVFAIL is any SERVFAIL, and the next
// resolver's answer decides, as before.
func TestDNSSECBogusAsksNoOtherResolver(t *testing.T) {
	w := newDNSSECWorld(t)
	for _, mode := range []string{workerconf.DNSSECCheck, workerconf.DNSSECRequire} {
		v := w.validator(mode, w.withoutEDE, w.auth)
		p, err := v.CheckCAA(context.Background(), dnsID("nocaa.secure.test"), false, acme.ChallengeDNS01, testAccount)
		if err != nil {
			t.Fatalf("%s: CheckCAA: no verdict: %v", mode, err)
		}
		checkProblem(t, p, acme.ProblemDNS, "DNSSEC validation failed", "issuance is not permitted")
	}
	v := w.validator(workerconf.DNSSECOff, w.withoutEDE, w.auth)
	if p, err := v.CheckCAA(context.Background(), dnsID("nocaa.secure.test"), false, acme.ChallengeDNS01, testAccount); p != nil || err != nil {
		t.Fatalf("off: the second resolver's answer should decide: %v %v", p, err)
	}
}
