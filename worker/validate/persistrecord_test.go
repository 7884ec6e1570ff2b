package validate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestParsePersistRecord parses the records of
// draft-ietf-acme-dns-persist-01 (its figures, character-strings joined as
// a TXT value is) and the malformed ones its §4 and §9.3.1 name.
func TestParsePersistRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want PersistRecord
		err  string // a part of the error; "" for none
	}{
		{"figure 2, basic", "authority.example; accounturi=https://ca.example/acct/123",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123"}, ""},
		{"figure 3, first CA, wildcard", "ca1.example; accounturi=https://ca1.example/acme/acct/12345; policy=wildcard",
			PersistRecord{Issuer: "ca1.example", AccountURI: "https://ca1.example/acme/acct/12345", Wildcard: true}, ""},
		{"figure 3, second CA, persistUntil", "ca2.example; accounturi=https://ca2.example/acme/acct/67890; persistUntil=1767225600",
			PersistRecord{Issuer: "ca2.example", AccountURI: "https://ca2.example/acme/acct/67890", PersistUntil: time.Unix(1767225600, 0).UTC()}, ""},
		{"wildcard with persistUntil (2024-07-26)", "authority.example; accounturi=https://ca.example/acct/123; policy=wildcard; persistUntil=1721952000",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123", Wildcard: true,
				PersistUntil: time.Date(2024, 7, 26, 0, 0, 0, 0, time.UTC)}, ""},
		{"policy value in any case", "authority.example; accounturi=https://ca.example/acct/123; POLICY=WildCard",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123", Wildcard: true}, ""},
		{"another policy is as if absent", "authority.example; accounturi=https://ca.example/acct/123; policy=subdomains",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123"}, ""},
		{"unknown parameters are ignored", "authority.example; future=1; accounturi=https://ca.example/acct/123",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123"}, ""},
		{"issuer in upper case, spaces around", "  Authority.EXAMPLE ;accounturi = https://ca.example/acct/123 ",
			PersistRecord{Issuer: "authority.example", AccountURI: "https://ca.example/acct/123"}, ""},
		{"accounturi compared as written", "authority.example; accounturi=HTTPS://CA.example/acct/123",
			PersistRecord{Issuer: "authority.example", AccountURI: "HTTPS://CA.example/acct/123"}, ""},

		{"no accounturi", "authority.example; policy=wildcard", PersistRecord{Issuer: "authority.example"}, "no accounturi"},
		{"empty accounturi", "authority.example; accounturi=", PersistRecord{Issuer: "authority.example"}, "no accounturi"},
		{"accounturi twice", "authority.example; accounturi=https://ca.example/acct/1; accounturi=https://ca.example/acct/2",
			PersistRecord{Issuer: "authority.example"}, "appears twice"},
		{"policy twice, another case", "authority.example; accounturi=https://ca.example/acct/1; policy=wildcard; Policy=wildcard",
			PersistRecord{Issuer: "authority.example"}, "appears twice"},
		{"persistUntil not an integer", "authority.example; accounturi=https://ca.example/acct/1; persistUntil=2026-01-01",
			PersistRecord{Issuer: "authority.example"}, "not a base-10 integer"},
		{"persistUntil signed", "authority.example; accounturi=https://ca.example/acct/1; persistUntil=+1721952000",
			PersistRecord{Issuer: "authority.example"}, "not a base-10 integer"},
		{"persistUntil empty", "authority.example; accounturi=https://ca.example/acct/1; persistUntil=",
			PersistRecord{Issuer: "authority.example"}, "not a base-10 integer"},
		{"parameter without =", "authority.example; accounturi", PersistRecord{Issuer: "authority.example"}, "no \"=\""},
		{"not an issue-value", "v=spf1 -all", PersistRecord{}, "not an RFC 8659 issue-value"},
		{"dns-01 digest", "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0", PersistRecord{Issuer: "loqxcyv8q5onbjqxbmr7sctno3tiaxdfowyjxajeux0"}, "no accounturi"},
		{"no issuer", "; accounturi=https://ca.example/acct/1", PersistRecord{AccountURI: "https://ca.example/acct/1"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParsePersistRecord(tc.in)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("ParsePersistRecord(%q): %v", tc.in, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("ParsePersistRecord(%q) error = %v, want one saying %q", tc.in, err, tc.err)
			}
			if got != tc.want {
				t.Errorf("ParsePersistRecord(%q) = %+v, want %+v", tc.in, got, tc.want)
			}
		})
	}
}

// TestAccountLabel derives dns-account-01's label for the account URLs of
// draft-ietf-acme-dns-account-label's example and of Boulder's tests.
func TestAccountLabel(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://example.com/acme/acct/ExampleAccount": "_ujmmovf2vn55tgye",
		"https://example.com/acme/acct/1":              "_vrr7uudrklshxb6l",
		"https://example.com/acme/acct/12345":          "_ao3pcvmacvwyw63b",
	} {
		if got := AccountLabel(url); got != want {
			t.Errorf("AccountLabel(%q) = %q, want %q", url, got, want)
		}
	}
}

// FuzzParsePersistRecord checks the dns-persist-01 record parser never
// panics, returns only what the grammar allows, and reads a record it
// accepted the same once rendered again. Seeds live in
// testdata/fuzz/FuzzParsePersistRecord.
func FuzzParsePersistRecord(f *testing.F) {
	f.Add("authority.example; accounturi=https://ca.example/acct/123; policy=wildcard; persistUntil=1721952000")
	f.Add("ca1.example;accounturi=x;accounturi=y")
	f.Fuzz(func(t *testing.T, in string) {
		rec, err := ParsePersistRecord(in)
		if rec.Issuer != "" && (!isCAADomain(rec.Issuer) || rec.Issuer != strings.ToLower(rec.Issuer)) {
			t.Fatalf("issuer %q is not a lower-case issuer-domain-name", rec.Issuer)
		}
		if err != nil {
			if rec.AccountURI != "" || rec.Wildcard || !rec.PersistUntil.IsZero() {
				t.Fatalf("error %v came with parameters %+v", err, rec)
			}
			return
		}
		if rec.AccountURI == "" || strings.ContainsAny(rec.AccountURI, "; \t") {
			t.Fatalf("accounturi %q is empty or holds a separator", rec.AccountURI)
		}
		again := rec.Issuer + "; accounturi=" + rec.AccountURI
		if rec.Wildcard {
			again += "; policy=wildcard"
		}
		if !rec.PersistUntil.IsZero() {
			again += fmt.Sprintf("; persistUntil=%d", rec.PersistUntil.Unix())
		}
		if rec2, err := ParsePersistRecord(again); err != nil || rec2 != rec {
			t.Fatalf("%q re-rendered as %q parsed as %+v, %v", in, again, rec2, err)
		}
	})
}

// TestHashedAccountURI computes draft-ietf-acme-dns-persist-02's test
// vectors (§10.2), for the name and for "*".
func TestHashedAccountURI(t *testing.T) {
	t.Parallel()
	const prefix, thumb, acct = "https://ca.example/account-hash/", "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs", "https://ca.example/acct/123"
	for domain, want := range map[string]string{
		"example.com": prefix + "sha-256/5SQm7n6tPh2-PlLbCKGnViTXX5z19SCN4cPGQHSk-kw",
		"*":           prefix + "sha-256/NpDnSwUthQK8zCgFdefYxAdAVPnygMLbs9US6oO-5ug",
	} {
		if got := HashedAccountURI(prefix, domain, thumb, acct); got != want {
			t.Errorf("HashedAccountURI(%q) = %q, want %q", domain, got, want)
		}
	}
}
