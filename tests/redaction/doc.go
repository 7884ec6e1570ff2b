// Package redaction runs every command of every Hallmark binary, and the
// frontend and the worker as servers, with a database URL that carries a
// password (and an admin token), and fails if any output or log file shows
// either: the binaries mask secrets with the one package redact.
package redaction
