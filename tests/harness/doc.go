// Package harness is what the end-to-end test packages (tests/e2e,
// tests/admin, tests/interop, tests/replicas) share to run the real
// Hallmark binaries on loopback: it builds hallmark, hallmark-frontend and
// hallmark-worker once per test binary, writes their configuration, starts,
// kills and stops their processes (with their logs in the test output when
// a test fails), waits for them to be ready, and drives lego against them.
//
// It is imported by tests only. It must never reach anything but loopback,
// never mock what it can run, and never hold what only one test package
// needs (interop's matrix, replicas' proxy, admin's browser stay there).
package harness
