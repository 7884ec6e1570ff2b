package signer

import "errors"

// ErrUnavailable wraps a backend failure that means the attempt could not
// happen (an HSM that went away, a module error, an upstream CA that did not
// answer), as opposed to a verdict on the request. The worker retries such a
// job instead of failing the order.
var ErrUnavailable = errors.New("signing backend unavailable")
