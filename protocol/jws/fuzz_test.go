package jws

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// parseProblems are the only problem types Parse, ParseInner and Verify may
// return for client input.
var parseProblems = map[acme.ProblemType]bool{
	acme.ProblemMalformed:             true,
	acme.ProblemBadSignatureAlgorithm: true,
	acme.ProblemBadPublicKey:          true,
	acme.ProblemBadNonce:              true,
}

func checkErr(t *testing.T, what string, err error) {
	t.Helper()
	var ae *acme.Error
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v (%T) is not an *acme.Error", what, err, err)
	}
	if !parseProblems[ae.Problem.Type] {
		t.Fatalf("%s: unexpected problem type %s (%v)", what, ae.Problem.Type, err)
	}
	if ae.Problem.Detail == "" {
		t.Fatalf("%s: problem without a detail", what)
	}
}

// FuzzParse feeds arbitrary bodies to Parse, Verify and ParseInner. Seeds are
// in testdata/fuzz/FuzzParse (regenerate with HALLMARK_WRITE_SEEDS=1).
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"protected":"","payload":"","signature":""}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := Parse(body)
		if err != nil {
			checkErr(t, "Parse", err)
		} else {
			if !allowedAlg(m.Alg) {
				t.Fatalf("accepted alg %q", m.Alg)
			}
			if (m.JWK == nil) == (m.KeyID == "") {
				t.Fatalf("accepted a message with JWK=%v KeyID=%q", m.JWK, m.KeyID)
			}
			if m.URL == "" || m.Nonce == "" {
				t.Fatalf("accepted a message without url or nonce: %+v", m)
			}
			if m.JWK != nil {
				if !m.JWK.IsPublic() {
					t.Fatal("accepted a private jwk")
				}
				if _, err := verifyOwn(m); err != nil {
					checkErr(t, "Verify", err)
				} else {
					roundTrip(t, body, m)
				}
			}
		}
		im, _, err := ParseInner(body)
		if err != nil {
			checkErr(t, "ParseInner", err)
			return
		}
		if im.JWK == nil || im.KeyID != "" || im.Nonce != "" || im.URL == "" {
			t.Fatalf("ParseInner accepted %+v", im)
		}
		roundTrip(t, body, im)
	})
}

// verifyOwn is m.Verify with its own header key, as newAccount uses it.
func verifyOwn(m *Message) ([]byte, error) { return m.Verify(m.JWK) }

// roundTrip asserts that a message that verified reports exactly what its
// signed protected header says.
func roundTrip(t *testing.T, body []byte, m *Message) {
	t.Helper()
	var outer map[string]json.RawMessage
	if err := json.Unmarshal(body, &outer); err != nil {
		t.Fatalf("verified body is not a JSON object: %v", err)
	}
	var prot string
	if err := json.Unmarshal(outer["protected"], &prot); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(prot)
	if err != nil {
		t.Fatal(err)
	}
	var h struct {
		Alg, Nonce, URL, KID string
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatalf("verified header does not decode: %v", err)
	}
	if h.Alg != m.Alg || h.Nonce != m.Nonce || h.URL != m.URL || h.KID != m.KeyID {
		t.Fatalf("header %+v does not round-trip to %+v", h, m)
	}
}

// TestWriteFuzzSeeds regenerates the committed seed corpus: real, valid
// requests of every accepted algorithm and a few broken ones.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("HALLMARK_WRITE_SEEDS") == "" {
		t.Skip("set HALLMARK_WRITE_SEEDS=1 to rewrite testdata/fuzz/FuzzParse")
	}
	ks := keys()
	seeds := map[string][]byte{}
	for _, name := range []string{"p256", "p384", "rsa2048", "ed25519"} {
		k := ks[name]
		seeds["valid-jwk-"+name] = enc(build(k, algFor(k), jwkHeader(k), []byte(`{"termsOfServiceAgreed":true}`)))
		seeds["valid-kid-"+name] = enc(build(k, algFor(k), kidHeader(), []byte{}))
		seeds["valid-inner-"+name] = enc(build(k, algFor(k), map[string]any{"jwk": jwkJSON(k.Public()), "url": "https://ca.test/acme/key-change"}, []byte(`{"account":"https://ca.test/acme/acct/1","oldKey":{}}`)))
	}
	p := ks["p256"]
	g := build(p, "ES256", jwkHeader(p), []byte(`{}`))
	seeds["compact"] = []byte(g["protected"].(string) + "." + g["payload"].(string) + "." + g["signature"].(string))
	seeds["general"] = enc(map[string]any{"payload": g["payload"], "signatures": []any{map[string]any{"protected": g["protected"], "signature": g["signature"]}}})
	h := jwkHeader(p)
	h["alg"] = "none"
	seeds["alg-none"] = enc(build(p, "ES256", h, []byte(`{}`)))
	h = jwkHeader(p)
	h["kid"] = "x"
	seeds["jwk-and-kid"] = enc(build(p, "ES256", h, []byte(`{}`)))
	seeds["weak-rsa"] = enc(build(ks["rsa1024"], "RS256", jwkHeader(ks["rsa1024"]), []byte(`{}`)))
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	writeSeeds(t, dir, seeds)
}

func writeSeeds(t *testing.T, dir string, seeds map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range seeds {
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSeedCorpus keeps the committed corpus meaningful: the seeds named
// valid-* must still be accepted, the others refused.
func TestSeedCorpus(t *testing.T) {
	t.Parallel()
	for name, body := range readSeeds(t, filepath.Join("testdata", "fuzz", "FuzzParse")) {
		inner := strings.HasPrefix(name, "seed-valid-inner-")
		var err error
		if inner {
			_, _, err = ParseInner(body)
		} else {
			var m *Message
			if m, err = Parse(body); err == nil {
				key := m.JWK
				if key == nil {
					continue // a kid seed: no account key to verify with here
				}
				_, err = m.Verify(key)
			}
		}
		if valid := strings.HasPrefix(name, "seed-valid-"); valid != (err == nil) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func readSeeds(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(raw), "\n", 3)
		if len(lines) < 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") {
			t.Fatalf("%s is not a corpus file", e.Name())
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out[e.Name()] = []byte(s)
	}
	if len(out) == 0 {
		t.Fatalf("no seeds in %s", dir)
	}
	return out
}

// FuzzMembers: members' fast path (one json.Unmarshal and a count of the
// top-level members) accepts exactly what the member-by-member decoder
// accepts, with the same members, and refuses the rest; and UniqueMembers'
// token stream accepts exactly what uniqueSlow, built on that decoder and
// json.Unmarshal, accepts.
//
//	go test ./protocol/jws -run '^$' -fuzz FuzzMembers -fuzztime 60s
func FuzzMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"a":2}`, `{"a":{"b":[1,{"c":","}]},"d":"\"}"}`,
		`{"a":"x\\"}`, `{"\u0061":1,"a":2}`, `{"a":1}{}`, `null`, `[]`, `{"a":1,}`, `{"\xff":1,"\xfe":2}`,
		// A duplicate the count must not miss: a fast path that undercounts
		// accepts these.
		`{"a":"\"","a":1}`, `{"a":"\\","a":1}`, `{"a":[{"b":1}],"a":2}`, `{"a":{},"a":{}}`, `{"a":"{","a":"}"}`,
		// Duplicates UniqueMembers must find below the top, or but for case.
		`{"a":[{"b":1},{"c":2,"c":3}]}`, `{"a":{"b":{"c":1,"C":2}}}`, `[{"k":1,"\u212a":2}]`, `{"s":1,"\u017f":2}`,
		`[1,[2,[3]],{"a":1e999}]`, `"x"`, ` 1 2`, `{"a":1}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gotErr := members(data)
		want, wantErr := membersExact(data)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("members(%q) error %v, the decoder's %v", data, gotErr, wantErr)
		}
		if !maps.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("members(%q) = %q, the decoder's %q", data, got, want)
		}
		if uErr, sErr := UniqueMembers(data), uniqueSlow(data); (uErr == nil) != (sErr == nil) {
			t.Fatalf("UniqueMembers(%q) error %v, uniqueSlow's %v", data, uErr, sErr)
		}
	})
}

// uniqueSlow is UniqueMembers another way: each object through
// membersExact, its names compared pairwise with strings.EqualFold, each
// array through json.Unmarshal, recursively.
func uniqueSlow(data []byte) error {
	trimmed := bytes.Trim(data, " \t\r\n") // JSON's whitespace only
	switch {
	case len(trimmed) > 0 && trimmed[0] == '{':
		m, err := membersExact(trimmed)
		if err != nil {
			return err
		}
		names := slices.Collect(maps.Keys(m))
		for i, a := range names {
			for _, b := range names[i+1:] {
				if strings.EqualFold(a, b) {
					return fmt.Errorf("%q and %q", a, b)
				}
			}
			if err := uniqueSlow(m[a]); err != nil {
				return err
			}
		}
		return nil
	case len(trimmed) > 0 && trimmed[0] == '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(trimmed, &elems); err != nil {
			return err
		}
		for _, e := range elems {
			if err := uniqueSlow(e); err != nil {
				return err
			}
		}
		return nil
	}
	if !json.Valid(trimmed) {
		return errors.New("invalid JSON")
	}
	return nil
}
