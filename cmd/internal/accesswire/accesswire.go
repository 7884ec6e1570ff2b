// Package accesswire builds the client access policy of a configuration
// with what this build links, the same for the frontend, which enforces it,
// and the CLI, which explains it.
package accesswire

import (
	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/protocol/access"
	"github.com/hallmark-ca/hallmark/protocol/access/ipam"
)

// Policy is cfg's [access], nil when it asks for nothing.
func Policy(cfg config.Config) (*access.Policy, error) {
	return access.New(cfg.Access, access.Options{IPAM: ipamSource})
}

// ipamSource builds an ipam check's source: NetBox or phpIPAM, as its
// [access.checks.<name>.source] says.
func ipamSource(_ string, c access.Check) (access.NameSource, error) { return ipam.New(c.Source) }
