// Package accesswire builds the client access policy of a configuration
// with what this build links, the same for the frontend, which enforces it,
// and the CLI, which explains it.
package accesswire

import (
	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/protocol/access"
)

// Policy is cfg's [access], nil when it asks for nothing.
func Policy(cfg config.Config) (*access.Policy, error) {
	return access.New(cfg.Access, access.Options{IPAM: ipamSource})
}

// ipamSource builds an ipam check's source. No IPAM source is linked into
// this build (package protocol/access/ipam is not here yet), so it is nil
// and every ipam check answers unknown: "IPAM not built".
var ipamSource func(name string, c access.Check) (access.NameSource, error)
