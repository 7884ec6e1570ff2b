// Package adminconf is the operator panel's section of the configuration
// file, [admin], with its checks. It is not in package admin because every
// binary checks the whole file, and only the frontend links the panel
// (tests/layering); admin.LoadToken reads the token it names.
package adminconf

import (
	"errors"
	"fmt"
	"net"
)

// Config is the operator panel's own listener, [admin]. Empty Listen
// disables it.
type Config struct {
	Listen    string `toml:"listen"`
	TokenFile string `toml:"token_file"`
	TokenEnv  string `toml:"token_env"`
	// SecureCookies marks the panel's cookies Secure, so a browser sends
	// them only over HTTPS. Default false: the listener speaks plain HTTP
	// (loopback or a management network); set it when a TLS-terminating
	// proxy serves the panel.
	SecureCookies bool `toml:"secure_cookies"`
	// TLSCertFile and TLSKeyFile serve the panel over HTTPS; ClientCAFile
	// is the operators' CA (`hallmark operators init-ca`), whose client
	// certificates sign operators in with their role. ClientCAKeyFile is
	// its key, read only by `hallmark operators add`.
	TLSCertFile     string `toml:"tls_cert_file"`
	TLSKeyFile      string `toml:"tls_key_file"`
	ClientCAFile    string `toml:"client_ca_file"`
	ClientCAKeyFile string `toml:"client_ca_key_file"`
	// TokenOff turns the shared token off: client certificates only. The
	// token is a bootstrap for a fresh install.
	TokenOff bool `toml:"token_off"`
	// OIDC is [admin.oidc]: sign-in through an OpenID Connect provider.
	OIDC OIDC `toml:"oidc"`
}

// Validate reports the problems of [admin] when the panel is enabled, each
// naming its key: a listener address and a token to check operators
// against.
func (c Config) Validate() error {
	if c.Listen == "" {
		return nil
	}
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("admin.listen: must be host:port: %v", err))
	}
	if c.TokenFile == "" && c.TokenEnv == "" && !c.TokenOff {
		errs = append(errs, errors.New("admin.token_file: the admin panel needs a token: set admin.token_file or admin.token_env"))
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("admin.tls_key_file: set both admin.tls_cert_file and admin.tls_key_file, or neither"))
	}
	if c.ClientCAFile != "" && c.TLSCertFile == "" {
		errs = append(errs, errors.New("admin.client_ca_file: client certificates need the panel on TLS: set admin.tls_cert_file and admin.tls_key_file"))
	}
	if c.TokenOff && c.ClientCAFile == "" && !c.OIDC.On() {
		errs = append(errs, errors.New("admin.token_off: with the token off nobody could sign in: set admin.client_ca_file (the operators' CA) or [admin.oidc] first"))
	}
	errs = append(errs, c.validateOIDC()...)
	return errors.Join(errs...)
}
