package validate

import (
	"crypto/sha256"
	"encoding/asn1"
	"reflect"
	"strings"
	"testing"
)

func TestParseIssueValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		issuer  string
		params  []caaParam
		wantErr bool
	}{
		{in: "hallmark.test", issuer: "hallmark.test"},
		{in: "  hallmark.test  ", issuer: "hallmark.test"},
		{in: "", issuer: ""},
		{in: ";", issuer: ""},
		{in: "hallmark.test;", issuer: "hallmark.test"},
		{in: "hallmark.test; accounturi=https://ca.test/acct/1", issuer: "hallmark.test",
			params: []caaParam{{"accounturi", "https://ca.test/acct/1"}}},
		{in: "hallmark.test;accounturi = x ;validationmethods=dns-01,http-01", issuer: "hallmark.test",
			params: []caaParam{{"accounturi", "x"}, {"validationmethods", "dns-01,http-01"}}},
		{in: "hallmark.test; AccountURI=x", issuer: "hallmark.test", params: []caaParam{{"accounturi", "x"}}},
		{in: "hallmark.test; empty=", issuer: "hallmark.test", params: []caaParam{{"empty", ""}}},
		{in: "; accounturi=x", issuer: "", params: []caaParam{{"accounturi", "x"}}},
		{in: "hallmark.test; accounturi", wantErr: true},
		{in: "hallmark.test; a=b;", wantErr: true},
		{in: "hallmark.test; a=b;; c=d", wantErr: true},
		{in: "hallmark.test; a=b c", wantErr: true},
		{in: "hallmark.test; a=b; A=c", wantErr: true},
		{in: "hallmark.test; -a=b", wantErr: true},
		{in: "hallmark.test; a=é", wantErr: true},
		{in: "hallmark..test", wantErr: true},
		{in: "hallmark.test.", wantErr: true},
		{in: "-hallmark.test", wantErr: true},
		{in: "hall mark.test", wantErr: true},
		{in: "hallmark_ca.test", wantErr: true},
	}
	for _, tc := range tests {
		issuer, params, err := parseIssueValue(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseIssueValue(%q) = %q, %v; want an error", tc.in, issuer, params)
			}
			continue
		}
		if err != nil || issuer != tc.issuer || !reflect.DeepEqual(params, tc.params) {
			t.Errorf("parseIssueValue(%q) = %q, %v, %v; want %q, %v", tc.in, issuer, params, err, tc.issuer, tc.params)
		}
	}
}

func TestParseValidationMethods(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "dns-01", want: []string{"dns-01"}},
		{in: "dns-01,http-01,tls-alpn-01", want: []string{"dns-01", "http-01", "tls-alpn-01"}},
		{in: "", want: nil},
		{in: "dns-01,", wantErr: true},
		{in: ",dns-01", wantErr: true},
		{in: "dns_01", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseValidationMethods(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseValidationMethods(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// formatIssueValue is the canonical rendering of a parsed value; parsing it
// again must give the same result.
func formatIssueValue(issuer string, params []caaParam) string {
	if len(params) == 0 {
		return issuer
	}
	parts := make([]string, len(params))
	for i, p := range params {
		parts[i] = p.tag + "=" + p.value
	}
	return issuer + "; " + strings.Join(parts, "; ")
}

// FuzzParseIssueValue checks the CAA value parser never panics, only
// returns what the grammar allows, and is stable under re-rendering.
// Seeds live in testdata/fuzz/FuzzParseIssueValue.
func FuzzParseIssueValue(f *testing.F) {
	f.Add("hallmark.test; accounturi=https://ca.test/acct/1; validationmethods=dns-01")
	f.Fuzz(func(t *testing.T, in string) {
		issuer, params, err := parseIssueValue(in)
		if err != nil {
			if issuer != "" || params != nil {
				t.Fatalf("error %v came with results %q %v", err, issuer, params)
			}
			return
		}
		if issuer != "" && !isCAADomain(issuer) {
			t.Fatalf("issuer %q is not an issuer-domain-name", issuer)
		}
		seen := map[string]bool{}
		for _, p := range params {
			if !isCAALabel(p.tag) || p.tag != strings.ToLower(p.tag) || seen[p.tag] {
				t.Fatalf("bad or repeated tag %q", p.tag)
			}
			seen[p.tag] = true
			if strings.ContainsAny(p.value, "; \t") {
				t.Fatalf("value %q holds a separator", p.value)
			}
		}
		again, params2, err := parseIssueValue(formatIssueValue(issuer, params))
		if err != nil || again != issuer || !reflect.DeepEqual(params, params2) {
			t.Fatalf("re-rendered %q parsed as %q %v %v; want %q %v", formatIssueValue(issuer, params), again, params2, err, issuer, params)
		}
		_, _ = parseValidationMethods(seenValue(params, "validationmethods"))
	})
}

func seenValue(params []caaParam, tag string) string {
	for _, p := range params {
		if p.tag == tag {
			return p.value
		}
	}
	return ""
}

// FuzzALPNExtensions feeds arbitrary extension values to the tls-alpn-01
// certificate parsers, which read attacker-supplied DER.
// Seeds live in testdata/fuzz/FuzzALPNExtensions.
func FuzzALPNExtensions(f *testing.F) {
	sum := sha256.Sum256([]byte(testKeyAuth))
	good, _ := asn1.Marshal(sum[:])
	san, _ := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: tagDNSName, Bytes: []byte("example.test")}})
	f.Add(san, good)
	f.Fuzz(func(t *testing.T, sanDER, acmeDER []byte) {
		if tag, value, err := parseSingleSAN(sanDER); err == nil {
			_ = describeSAN(tag, value)
		}
		if digest, err := parseACMEIdentifier(acmeDER); err == nil && len(digest) != sha256.Size {
			t.Fatalf("accepted a %d-byte digest", len(digest))
		}
	})
}
