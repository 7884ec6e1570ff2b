package ipam

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// The testdata are NetBox's and phpIPAM's REST answers as their API
// documentation shows them (NetBox 4.x /api/ipam/ip-addresses/, dcim
// devices, virtualization virtual machines; phpIPAM 1.x
// /api/<app>/addresses/search/<ip>/). Neither IPAM runs here: fakeIPAM
// serves them on loopback.

const token = "sekrit-ipam-token"

// fakeIPAM serves the testdata as NetBox or phpIPAM would, by address;
// hosts counts the device and virtual machine lookups.
type fakeIPAM struct {
	t     *testing.T
	hosts atomic.Int32
}

func (f *fakeIPAM) file(w http.ResponseWriter, status int, name string) {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		f.t.Error(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// special answers the addresses every kind treats alike: a failure, a
// hang, an answer too large, a redirect. It reports whether it answered.
func (f *fakeIPAM) special(w http.ResponseWriter, r *http.Request, ip, kind string) bool {
	switch ip {
	case "10.20.30.66":
		f.file(w, http.StatusInternalServerError, kind+"/error-500.json")
	case "10.20.30.77":
		<-r.Context().Done() // never answers; the lookup's deadline ends it
	case "10.20.30.88":
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"count": 1, "results": [{"dns_name": "%s"}]}`, strings.Repeat("a", 2<<20))
	case "10.20.30.12":
		http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
	default:
		return false
	}
	return true
}

func (f *fakeIPAM) netbox(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Token "+token {
		f.file(w, http.StatusForbidden, "netbox/error-403.json")
		return
	}
	switch r.URL.Path {
	case "/api/dcim/devices/7/":
		f.hosts.Add(1)
		f.file(w, http.StatusOK, "netbox/device-7.json")
		return
	case "/api/virtualization/virtual-machines/3/":
		f.hosts.Add(1)
		f.file(w, http.StatusOK, "netbox/virtual-machine-3.json")
		return
	case "/api/ipam/ip-addresses/":
	default:
		http.NotFound(w, r)
		return
	}
	ip := r.URL.Query().Get("address")
	if f.special(w, r, ip, "netbox") {
		return
	}
	name := map[string]string{"10.20.30.40": "device", "2001:db8:20::41": "vm", "10.20.30.50": "vip"}[ip]
	if name == "" {
		name = "empty"
	}
	f.file(w, http.StatusOK, "netbox/ip-addresses-"+name+".json")
}

func (f *fakeIPAM) phpipam(w http.ResponseWriter, r *http.Request) {
	ip, ok := strings.CutPrefix(r.URL.Path, "/api/hallmark/addresses/search/")
	if !ok {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte("<html><body><h1>404 Not Found</h1>nginx</body></html>"))
		return
	}
	if r.Header.Get("token") != token {
		f.file(w, http.StatusUnauthorized, "phpipam/error-401.json")
		return
	}
	ip = strings.TrimSuffix(ip, "/")
	switch {
	case f.special(w, r, ip, "phpipam"):
	case ip == "10.40.0.17":
		f.file(w, http.StatusOK, "phpipam/search-found.json")
	default:
		f.file(w, http.StatusNotFound, "phpipam/search-notfound.json")
	}
}

// source builds a source of kind on the fake, with the token in a file.
func source(t *testing.T, kind, base, field, tok, app string) Source {
	t.Helper()
	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Kind: kind, URL: base, TokenFile: tf, AppID: app, CustomField: field, TimeoutMS: 300})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNames(t *testing.T) {
	t.Parallel()
	f := &fakeIPAM{t: t}
	nb := httptest.NewServer(http.HandlerFunc(f.netbox))
	t.Cleanup(nb.Close)
	php := httptest.NewServer(http.HandlerFunc(f.phpipam))
	t.Cleanup(php.Close)
	for _, tc := range []struct {
		name, kind, addr, field string
		tok, app, base          string // defaults: the token, "hallmark", the kind's fake
		want                    []string
		hosts                   int32 // device and VM lookups made
		err                     string
	}{
		{name: "netbox: found, with its device's custom field", kind: KindNetBox, addr: "10.20.30.40", field: "acme_names",
			want: []string{"build01.corp.example", "www.build01.corp.example", "api.corp.example", "ci.corp.example", "artifacts.corp.example"}, hosts: 1},
		{name: "netbox: no custom field configured", kind: KindNetBox, addr: "10.20.30.40", want: []string{"build01.corp.example"}},
		{name: "netbox: an IPv4-mapped address", kind: KindNetBox, addr: "::ffff:10.20.30.40", want: []string{"build01.corp.example"}},
		{name: "netbox: a virtual machine's custom field", kind: KindNetBox, addr: "2001:db8:20::41", field: "acme_names",
			want: []string{"wiki.corp.example"}, hosts: 1},
		{name: "netbox: a VRRP address names itself, not a host", kind: KindNetBox, addr: "10.20.30.50", field: "acme_names",
			want: []string{"lb.corp.example", "www.corp.example"}},
		{name: "netbox: not found", kind: KindNetBox, addr: "10.20.30.99", field: "acme_names", want: []string{}},
		{name: "netbox: 5xx", kind: KindNetBox, addr: "10.20.30.66", err: "500 Internal Server Error"},
		{name: "netbox: timeout", kind: KindNetBox, addr: "10.20.30.77", err: "did not answer within 300ms"},
		{name: "netbox: an answer too large", kind: KindNetBox, addr: "10.20.30.88", err: "more than 1048576 bytes"},
		{name: "netbox: a redirect is not followed", kind: KindNetBox, addr: "10.20.30.12", err: "redirects are not followed"},
		{name: "netbox: a wrong token", kind: KindNetBox, addr: "10.20.30.40", tok: "wrong", err: "check token_file"},
		{name: "netbox: nothing listening", kind: KindNetBox, addr: "10.20.30.40", base: "http://127.0.0.1:1", err: "connection refused"},
		{name: "phpipam: found, with the custom field", kind: KindPHPIPAM, addr: "10.40.0.17", field: "acme_names",
			want: []string{"intranet.corp.example", "www.intranet.corp.example", "wiki.corp.example"}},
		{name: "phpipam: the field named as phpIPAM returns it", kind: KindPHPIPAM, addr: "10.40.0.17", field: "custom_acme_names",
			want: []string{"intranet.corp.example", "www.intranet.corp.example", "wiki.corp.example"}},
		{name: "phpipam: not found", kind: KindPHPIPAM, addr: "10.40.0.99", field: "acme_names", want: []string{}},
		{name: "phpipam: 5xx", kind: KindPHPIPAM, addr: "10.20.30.66", err: "Connection refused"},
		{name: "phpipam: timeout", kind: KindPHPIPAM, addr: "10.20.30.77", err: "did not answer within 300ms"},
		{name: "phpipam: an answer too large", kind: KindPHPIPAM, addr: "10.20.30.88", err: "more than 1048576 bytes"},
		{name: "phpipam: a wrong token", kind: KindPHPIPAM, addr: "10.40.0.17", tok: "wrong", err: "Invalid token"},
		{name: "phpipam: a wrong app_id is no \"not found\"", kind: KindPHPIPAM, addr: "10.40.0.17", app: "other", err: "404 Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, app, base := tc.tok, tc.app, tc.base
			if tok == "" {
				tok = token
			}
			if app == "" && tc.kind == KindPHPIPAM {
				app = "hallmark"
			}
			if base == "" {
				base = map[string]string{KindNetBox: nb.URL, KindPHPIPAM: php.URL}[tc.kind]
			}
			before := f.hosts.Load()
			got, err := source(t, tc.kind, base, tc.field, tok, app).Names(context.Background(), netip.MustParseAddr(tc.addr))
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("Names = %v, %v; want an error with %q", got, err, tc.err)
			case tc.err != "" && strings.Contains(err.Error(), token):
				t.Fatalf("the error shows the token: %v", err)
			case tc.err == "" && (err != nil || got == nil || !slices.Equal(got, tc.want)):
				t.Fatalf("Names = %#v, %v; want %#v", got, err, tc.want)
			}
			if n := f.hosts.Load() - before; tc.err == "" && n != tc.hosts {
				t.Errorf("%d device or VM lookups, want %d", n, tc.hosts)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	good := Config{Kind: KindNetBox, URL: "https://netbox.corp.example", TokenFile: "/etc/hallmark/netbox.token", CustomField: "acme_names"}
	if err := good.Validate(); err != nil {
		t.Fatalf("a good NetBox section: %v", err)
	}
	for _, tc := range []struct {
		edit func(*Config)
		key  string
	}{
		{func(c *Config) { c.Kind = "infoblox" }, "kind:"},
		{func(c *Config) { c.URL = "netbox.corp.example" }, "url:"},
		{func(c *Config) { c.URL = "https://u:pw@netbox.corp.example" }, "url:"},
		{func(c *Config) { c.TokenFile = "" }, "token_file:"},
		{func(c *Config) { c.AppID = "app" }, "app_id:"},
		{func(c *Config) { c.Kind = KindPHPIPAM }, "app_id:"},
		{func(c *Config) { c.Kind, c.AppID = KindPHPIPAM, "../admin" }, "app_id:"},
		{func(c *Config) { c.CustomField = "a/b" }, "custom_field:"},
		{func(c *Config) { c.TimeoutMS = 60000 }, "timeout_ms:"},
		{func(c *Config) { c.TimeoutMS = -1 }, "timeout_ms:"},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.key) || strings.Contains(err.Error(), "pw@") {
			t.Errorf("%+v: %v, want a problem naming %s", c, err, tc.key)
		}
	}
	if _, err := New(Config{Kind: KindNetBox, URL: "https://netbox.corp.example", TokenFile: filepath.Join(t.TempDir(), "none")}); err == nil || !strings.Contains(err.Error(), "token_file") {
		t.Errorf("New with a missing token file: %v", err)
	}
}
