package access

import (
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/hallmark-ca/hallmark/protocol/access/ipam"
)

// TestValidate: every problem of [access] is reported, each naming its key.
func TestValidate(t *testing.T) {
	t.Parallel()
	no := false
	cfg := Config{
		Mode: "audit", Default: "maybe", TrustedProxies: []string{"10.0.0.1"}, ForwardedHeader: "X Forwarded",
		Checks: map[string]Check{
			"office":  {Kind: "cidr", Ranges: []string{"10.0.0.0/33"}, Allow: []string{"*.corp"}},
			"ptr":     {Kind: "rdns", Allow: []string{"a.*.corp"}, ForwardConfirm: &no},
			"names":   {Kind: "identifiers", Regex: []string{"(unclosed"}},
			"hook":    {Kind: "hook", On: "always", TimeoutMS: 90_000},
			"geo":     {Kind: "geoip"},
			"and":     {Kind: "eab"},
			"badenv":  {Kind: "hook", Command: []string{"/bin/true"}, Env: map[string]string{"A=B": "x"}},
			"fine":    {Kind: "eab", KeyLabels: []string{"team-*"}},
			"ipamchk": {Kind: "ipam", Source: ipam.Config{Kind: "netbox", URL: "https://netbox.test", TokenFile: "/etc/hallmark/netbox.token"}},
			"badipam": {Kind: "ipam", Source: ipam.Config{Kind: "infoblox"}},
			"stray":   {Kind: "cidr", Ranges: []string{"10.0.0.0/8"}, Source: ipam.Config{Kind: "netbox"}},
		},
		Rules: []Rule{
			{When: "office and not ptr", Action: "deny", Problem: "rejectedIdentifier"},
			{When: "office or nosuch", Action: "allow", Message: "hi"},
			{When: "fine and (", Action: "deny"},
			{When: "", Action: "block"},
			{When: "names", Action: "deny", Problem: "forbidden"},
		},
	}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("Validate accepted a broken [access]")
	}
	for _, want := range []string{
		`access.mode: must be "enforce" or "warn", got "audit"`,
		`access.default: must be "allow" or "deny"`,
		`access.trusted_proxies: "10.0.0.1" is not a CIDR range`,
		`access.forwarded_header: "X Forwarded" is not a header name`,
		`access.checks.office.ranges: "10.0.0.0/33" is not a CIDR range`,
		`access.checks.office.allow: is not a setting of kind cidr (it takes ranges)`,
		`access.checks.ptr.allow: "a.*.corp": a "*" label may only be the leftmost`,
		`access.checks.ptr.resolvers: an rdns check needs DNS resolvers`,
		`access.checks.names.regex: "(unclosed" is not a regular expression`,
		`access.checks.hook.command: a hook needs a command`,
		`access.checks.hook.on: must be "request", "account" or "order", got "always"`,
		`access.checks.hook.timeout_ms: must be 1 to 60000`,
		`access.checks.geo.kind: unknown kind "geoip"; use one of cidr, eab, hook, identifiers, ipam, rdns`,
		`access.checks.and: a check's name is`,
		`access.checks.badenv.env: "A=B" is not an environment variable name`,
		`access.checks.badipam.source.kind: must be "netbox" or "phpipam", got "infoblox"`,
		`access.checks.badipam.source.url: must be the IPAM's http(s) base URL`,
		`access.checks.badipam.source.token_file: must name the file`,
		`access.checks.stray.source: is not a setting of kind cidr`,
		`access.rules[0].problem: rejectedIdentifier needs identifiers`,
		`access.rules[1].when: names check "nosuch", which is not in access.checks`,
		`access.rules[1].action: an allow rule takes no problem or message`,
		`access.rules[2].when: the condition ends where a check name was expected`,
		`access.rules[3].when: a rule needs a condition`,
		`access.rules[3].action: must be "allow" or "deny", got "block"`,
		`access.rules[4].problem: must be "unauthorized" or "rejectedIdentifier", got "forbidden"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "access.checks.fine") || strings.Contains(err.Error(), "access.checks.ipamchk") {
		t.Errorf("a valid check was reported:\n%v", err)
	}
}

// TestValidateAcceptsTheDocumentedExample: the example of
// docs/operations.md decodes strictly and is valid, and an empty section is
// no policy.
func TestValidateAcceptsTheDocumentedExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Who may ask: the access policy")
	_, block, _ := strings.Cut(section, "```toml\n")
	block, _, _ = strings.Cut(block, "```")
	var file struct{ Access Config }
	md, err := toml.Decode(block, &file)
	if err != nil || len(md.Undecoded()) > 0 {
		t.Fatalf("the documented example does not decode: %v, unknown keys %v", err, md.Undecoded())
	}
	if len(file.Access.Rules) != 4 || len(file.Access.Checks) != 6 {
		t.Fatalf("the example read as %+v", file.Access)
	}
	if err := file.Access.Validate(); err != nil {
		t.Fatal(err)
	}
	if (Config{}).Enabled() {
		t.Error("an empty [access] is a policy")
	}
	if p, err := New(Config{Mode: "warn", TrustedProxies: []string{"10.0.0.0/8"}}, Options{}); p != nil || err != nil {
		t.Errorf("New of a section with no rules = %v, %v; want no policy", p, err)
	}
}
