package jws

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

func TestUniqueMembers(t *testing.T) {
	t.Parallel()
	var many, manyDup strings.Builder
	for i := range 40 {
		fmt.Fprintf(&many, `,"m%d":%d`, i, i)
	}
	manyDup.WriteString(many.String() + `,"M7":0`)
	for _, tc := range []struct {
		name, in, err string // err: "" accepts, else a part of the error
	}{
		{"flat", `{"a":1,"b":[1,2],"c":{"d":null}}`, ""},
		{"not an object", `[{"a":1},{"a":1}]`, ""},
		{"a scalar", ` 7 `, ""},
		{"a number no float64 holds", `{"a":1e400}`, ""},
		{"the same name in sibling objects", `{"a":{"x":1},"b":{"x":1}}`, ""},
		{"many names", `{"z":0` + many.String() + `}`, ""},
		{"top level", `{"a":1,"a":2}`, `member "a" appears twice`},
		{"nested", `{"identifiers":[{"type":"dns","value":"a","value":"b"}]}`, `member "value" appears twice (in identifiers[0])`},
		{"deeper", `{"a":{"b":[0,{"c":{"d":1,"d":1}}]}}`, `(in a.b[1].c)`},
		{"letter case", `{"csr":"x","CSR":"y"}`, `members "csr" and "CSR" differ only in letter case`},
		{"the Kelvin sign", `{"kty":"EC","\u212aty":"RSA"}`, `differ only in letter case`},
		{"a long s", `{"s":1,"\u017f":2}`, `differ only in letter case`},
		{"escaped", `{"a":1,"\u0061":2}`, `member "a" appears twice`},
		{"many names, one twice but for case", `{"z":0` + manyDup.String() + `}`, `members "m7" and "M7"`},
		{"empty", ``, "invalid JSON"},
		{"invalid", `{"a":}`, "invalid JSON"},
		{"trailing data", `{"a":1}{"a":1}`, "after the JSON value"},
		{"a stray close", `{"a":1}}`, "invalid JSON"},
	} {
		err := UniqueMembers([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: refused %s: %v", tc.name, tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %s: error %v, want one saying %q", tc.name, tc.in, err, tc.err)
		}
	}
}

// TestParseRefusesDuplicates: a JWS whose outer object, protected header
// or header "jwk" names a member twice, or twice but for letter case, is
// malformed even though its signature verifies.
func TestParseRefusesDuplicates(t *testing.T) {
	t.Parallel()
	p256 := keys()["p256"]
	var jwk map[string]any
	if err := json.Unmarshal(jwkJSON(p256.Public()), &jwk); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		body func() []byte
		want string
	}{
		{"outer, but for case", func() []byte {
			g := build(p256, "ES256", jwkHeader(p256), []byte(`{}`))
			g["Payload"] = "e30"
			return enc(g)
		}, `members "Payload" and "payload" differ only in letter case`},
		{"header, but for case", func() []byte {
			h := jwkHeader(p256)
			h["URL"] = "https://elsewhere.test/acme/new-order"
			return enc(build(p256, "ES256", h, []byte(`{}`)))
		}, "differ only in letter case"},
		{"jwk", func() []byte {
			raw := string(jwkJSON(p256.Public()))
			h := jwkHeader(p256)
			h["jwk"] = json.RawMessage(strings.TrimSuffix(raw, "}") + `,"x":` + string(enc(jwk["y"])) + `}`)
			return enc(build(p256, "ES256", h, []byte(`{}`)))
		}, `"jwk": member "x" appears twice`},
		{"jwk, but for case", func() []byte {
			h := jwkHeader(p256)
			h["jwk"] = map[string]any{"kty": jwk["kty"], "crv": jwk["crv"], "x": jwk["x"], "y": jwk["y"], "Y": jwk["x"]}
			return enc(build(p256, "ES256", h, []byte(`{}`)))
		}, `"jwk": members`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse(tc.body())
			if err == nil || problemOf(t, err) != acme.ProblemMalformed || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse: %v; want malformed saying %q", err, tc.want)
			}
		})
	}
}
