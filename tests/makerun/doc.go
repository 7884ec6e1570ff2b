// Package makerun tests the README's first promise: `make run` starts a
// working CA, and the README's lego commands get certificates from it
// over http-01 and tls-alpn-01 as they are written there. The test reads
// the commands and the addresses from README.md, so it fails when the
// README drifts from what `make run` does. `make run` listens on fixed
// loopback ports (14000, 14001, 14053, 14080, 14090; lego on 5001 and
// 5002), so one run per machine at a time.
package makerun
