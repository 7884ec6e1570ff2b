package config

import "net"

// validateAdmin checks the [admin] section when the panel is enabled: its
// own listener, never one of the public ones, and a token to check
// operators against.
func (c Config) validateAdmin(add func(key, format string, args ...any)) {
	if c.Admin.Listen == "" {
		return
	}
	if _, _, err := net.SplitHostPort(c.Admin.Listen); err != nil {
		add("admin.listen", "must be host:port: %v", err)
	}
	if c.Admin.Listen == c.Server.Listen || (c.Server.PublicHTTPListen != "" && c.Admin.Listen == c.Server.PublicHTTPListen) {
		add("admin.listen", "must differ from server.listen and server.public_http_listen: the panel never shares a public listener")
	}
	if c.Admin.TokenFile == "" && c.Admin.TokenEnv == "" {
		add("admin.token_file", "the admin panel needs a token: set admin.token_file or admin.token_env")
	}
}
