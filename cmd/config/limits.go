package config

// Limits are the rate limits, `[limits]`. Every count lives in the database
// (never per process), so any number of frontends enforce one limit. 0 means
// unlimited, the default for each.
type Limits struct {
	// OrdersPerAccount bounds new orders per account per
	// OrdersWindowSeconds (default window 3 hours).
	OrdersPerAccount    int `toml:"orders_per_account"`
	OrdersWindowSeconds int `toml:"orders_window_seconds"`
	// CertificatesPerDomain bounds certificates issued per registered
	// domain (the public suffix list's eTLD+1) per
	// CertificatesWindowSeconds (default window 7 days).
	CertificatesPerDomain     int `toml:"certificates_per_domain"`
	CertificatesWindowSeconds int `toml:"certificates_window_seconds"`
	// FailedValidationsPerHour bounds failed validations per account and
	// identifier per hour.
	FailedValidationsPerHour int `toml:"failed_validations_per_hour"`
	// PendingAuthorizationsPerAccount bounds an account's pending
	// authorizations.
	PendingAuthorizationsPerAccount int `toml:"pending_authorizations_per_account"`
}

// limitDefaults fills the windows left at 0.
func (c *Config) limitDefaults() {
	if c.Limits.OrdersWindowSeconds == 0 {
		c.Limits.OrdersWindowSeconds = 3 * 3600
	}
	if c.Limits.CertificatesWindowSeconds == 0 {
		c.Limits.CertificatesWindowSeconds = 7 * 24 * 3600
	}
}

func (c Config) validateLimits(add func(key, format string, args ...any)) {
	l := c.Limits
	for _, f := range []struct {
		key string
		v   int
	}{
		{"limits.orders_per_account", l.OrdersPerAccount},
		{"limits.certificates_per_domain", l.CertificatesPerDomain},
		{"limits.failed_validations_per_hour", l.FailedValidationsPerHour},
		{"limits.pending_authorizations_per_account", l.PendingAuthorizationsPerAccount},
	} {
		if f.v < 0 {
			add(f.key, "must be 0 (unlimited) or more, got %d", f.v)
		}
	}
	if l.OrdersWindowSeconds < 1 {
		add("limits.orders_window_seconds", "must be at least 1, got %d", l.OrdersWindowSeconds)
	}
	if l.CertificatesWindowSeconds < 1 {
		add("limits.certificates_window_seconds", "must be at least 1, got %d", l.CertificatesWindowSeconds)
	}
}
