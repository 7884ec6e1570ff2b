package reload

import (
	"reflect"
	"slices"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// key is a setting a running process cannot switch: its value as the
// process reads it.
type key struct {
	name string
	of   func(config.Config) any
}

// shared are the settings neither process switches live: its database
// connection and its log handler. Profiles may come and go: the worker
// works a new one's queue at once and keeps a removed one mounted.
var shared = []key{
	{"database", func(c config.Config) any { return c.Database }},
	{"log", func(c config.Config) any { return c.Log }},
}

// FrontendKeys are the frontend's: its listeners, whether it serves TLS,
// the URLs in every stored resource's links, what sizes its admission and
// nonces, the panel (its own listener and token) and whether it watches
// verdicts at all.
var FrontendKeys = append(slices.Clone(shared), []key{
	{"server.listen", func(c config.Config) any { return c.Server.Listen }},
	{"server.public_http_listen", func(c config.Config) any { return c.Server.PublicHTTPListen }},
	{"server.pprof_listen", func(c config.Config) any { return c.Server.PprofListen }},
	{"server.plain_http", func(c config.Config) any { return c.Server.PlainHTTP }},
	{"server.tls_cert (TLS turned on or off)", func(c config.Config) any { return c.Server.TLSCert == "" }},
	{"server.base_url", func(c config.Config) any { return c.Server.BaseURL }},
	{"server.max_concurrent_requests", func(c config.Config) any { return c.Server.MaxConcurrentRequests }},
	{"server.request_timeout_ms", func(c config.Config) any { return c.Server.RequestTimeoutMS }},
	{"server.nonce_lifetime_seconds", func(c config.Config) any { return c.Server.NonceLifetimeSeconds }},
	{"server.verdict_wait_ms (turned on or off)", func(c config.Config) any { return c.Server.VerdictWaitMS > 0 }},
	{"admin", func(c config.Config) any { return c.Admin }},
}...)

// WorkerKeys are the worker's: [worker] sizes and identifies its job
// runner, and server.base_url is in its CAA account URIs.
var WorkerKeys = append(slices.Clone(shared), []key{
	{"worker", func(c config.Config) any { return c.Worker }},
	{"server.base_url", func(c config.Config) any { return c.Server.BaseURL }},
}...)

// Changed are the names of keys whose value differs between old and next.
func Changed(keys []key, old, next config.Config) []string {
	var out []string
	for _, k := range keys {
		if !reflect.DeepEqual(k.of(old), k.of(next)) {
			out = append(out, k.name)
		}
	}
	return out
}

// Check is Changed as a *Restart, nil when nothing needs one.
func Check(keys []key, old, next config.Config) error {
	if ch := Changed(keys, old, next); len(ch) > 0 {
		return &Restart{Keys: ch}
	}
	return nil
}
