// Package admin is the operator panel: server-rendered pages (html/template,
// assets embedded with go:embed, no JavaScript) over the store and the job
// queue, served by hallmark-frontend on its own listener.
//
// It owns operator authentication (a bearer token, basic auth or a login
// session, all checked against the configured token in constant time, failed
// token checks throttled per client address), CSRF protection of every form,
// and the audit trail of what operators do through it. It revokes through
// protocol/revocation, the one revocation code path shared with the ACME API
// and the CLI.
//
// It must never build a signer or hold key material (it runs inside the
// internet-facing frontend), never be mounted on the public ACME listener,
// and never change a record without writing an audit event naming the
// operator.
package admin
