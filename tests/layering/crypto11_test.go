package layering

import (
	"strings"
	"testing"
)

// onlyFrom is policy too: the packages that may link a library at all. A
// binary or package not listed that depends on it (directly or not) is a
// violation. Do not add to a list to fix a build.
var onlyFrom = []struct {
	to      string
	allowed []string
	why     string
}{
	{"github.com/ThalesGroup/crypto11/...", []string{"cmd/hallmark-worker", "signer/pkcs11"},
		"PKCS#11 needs cgo and holds the CA key: only the worker, through signer/pkcs11, touches it; the frontend and CLI build with CGO_ENABLED=0"},
	{"github.com/ThalesIgnite/crypto11/...", nil, "the old import path of crypto11: use github.com/ThalesGroup/crypto11 in signer/pkcs11"},
	{"github.com/miekg/pkcs11/...", []string{"cmd/hallmark-worker", "signer/pkcs11"}, "crypto11's PKCS#11 binding: as crypto11"},
}

func onlyViolations(deps map[string][]string) []string {
	var bad []string
	for _, r := range onlyFrom {
		for from, ds := range deps {
			if strings.HasPrefix(from, module+"/") {
				continue // not a package of the module (go list names them relative)
			}
			allowed := false
			for _, a := range r.allowed {
				if from == a {
					allowed = true
				}
			}
			if allowed {
				continue
			}
			for _, d := range ds {
				if matches(r.to, d) {
					bad = append(bad, from+" -> "+d+": "+r.why)
					break
				}
			}
		}
	}
	return bad
}

// TestOnlyTheWorkerLinksCrypto11 asserts, from `go list -deps`, that of all
// the module's packages only cmd/hallmark-worker and signer/pkcs11 depend on
// crypto11 (and its PKCS#11 binding).
func TestOnlyTheWorkerLinksCrypto11(t *testing.T) {
	deps := listDeps(t)
	for _, v := range onlyViolations(deps) {
		t.Error(v)
	}
	found := false
	for _, d := range deps["cmd/hallmark-worker"] {
		if matches("github.com/ThalesGroup/crypto11/...", d) {
			found = true
		}
	}
	if !found {
		t.Error("cmd/hallmark-worker does not link crypto11: the rule checks nothing (was signer/pkcs11 unmounted?)")
	}
}

func TestOnlyRuleCatchesAnotherPackage(t *testing.T) {
	t.Parallel()
	got := onlyViolations(map[string][]string{
		"cmd/hallmark-worker":   {"github.com/ThalesGroup/crypto11"},
		"worker":                {"github.com/ThalesGroup/crypto11"},
		"cmd/hallmark-frontend": {"github.com/miekg/pkcs11"},
	})
	if len(got) != 2 {
		t.Fatalf("want 2 violations (worker, frontend), got %v", got)
	}
}
