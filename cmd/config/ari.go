package config

import "time"

// RenewalWindow is the profile's suggested renewal window (RFC 9773 §4.2)
// as fractions of a certificate's validity period: by default the middle
// third, as Let's Encrypt suggests.
func (p Profile) RenewalWindow() (start, end float64) {
	if p.RenewalWindowStart == 0 && p.RenewalWindowEnd == 0 {
		return 1.0 / 3, 2.0 / 3
	}
	return p.RenewalWindowStart, p.RenewalWindowEnd
}

// RenewalInfoRetryAfter is server.renewal_info_retry_after_seconds as a
// duration, 6 hours by default.
func (c Config) RenewalInfoRetryAfter() time.Duration {
	if c.Server.RenewalInfoRetryAfterSeconds <= 0 {
		return 6 * time.Hour
	}
	return time.Duration(c.Server.RenewalInfoRetryAfterSeconds) * time.Second
}

func (c Config) validateRenewal(add func(key, format string, args ...any)) {
	if c.Server.RenewalInfoRetryAfterSeconds < 0 {
		add("server.renewal_info_retry_after_seconds", "must not be negative")
	}
	for n, p := range c.Profiles {
		start, end := p.RenewalWindow()
		if start < 0 || end > 1 || start >= end {
			add("profiles."+n+".renewal_window_start", "renewal_window_start (%g) and renewal_window_end (%g) must satisfy 0 <= start < end <= 1", start, end)
		}
	}
}
