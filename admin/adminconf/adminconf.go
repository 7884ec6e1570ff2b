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
	if c.TokenFile == "" && c.TokenEnv == "" {
		errs = append(errs, errors.New("admin.token_file: the admin panel needs a token: set admin.token_file or admin.token_env"))
	}
	return errors.Join(errs...)
}
