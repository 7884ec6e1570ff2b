package ipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
)

// netbox asks NetBox's REST API: the IP address objects of the address,
// and the device or virtual machine each is assigned to.
type netbox struct{ client }

// nbAddress is what the lookup reads of a NetBox IP address object.
type nbAddress struct {
	Address string `json:"address"` // "10.0.0.5/24"
	DNSName string `json:"dns_name"`
	Role    *struct {
		Value string `json:"value"`
	} `json:"role"`
	AssignedObjectType string `json:"assigned_object_type"`
	AssignedObject     *struct {
		Device         *nbRef `json:"device"`
		VirtualMachine *nbRef `json:"virtual_machine"`
	} `json:"assigned_object"`
	CustomFields map[string]any `json:"custom_fields"`
}

type nbRef struct {
	ID int `json:"id"`
}

// sharedRoles are NetBox's roles of an address several hosts answer on (a
// virtual IP, an FHRP group's): such an address is usually assigned to an
// FHRP group, not to one host's interface, and its dns_name is the name
// it carries.
var sharedRoles = []string{"vip", "anycast", "vrrp", "hsrp", "carp", "glbp"}

// maxAddresses bounds the objects one lookup reads (NetBox pages a list).
const maxAddresses = 50

func (n netbox) auth(h http.Header) { h.Set("Authorization", "Token "+n.token) }

// Names: every object of the address gives its dns_name and its custom
// field's names; one assigned to a device's or a virtual machine's
// interface also gives that host's custom field's names.
func (n netbox) Names(ctx context.Context, addr netip.Addr) ([]string, error) {
	addr = addr.Unmap()
	path := fmt.Sprintf("/api/ipam/ip-addresses/?address=%s&limit=%d", url.QueryEscape(addr.String()), maxAddresses)
	var list struct {
		Count   *int        `json:"count"`
		Results []nbAddress `json:"results"`
	}
	if err := n.getJSON(ctx, path, &list); err != nil {
		return nil, err
	}
	if list.Count == nil {
		return nil, fmt.Errorf("netbox: the answer to %s is no list of IP addresses; is url NetBox?", path)
	}
	var raw []string
	hosts := map[string]bool{}
	for _, a := range list.Results {
		if p, err := netip.ParsePrefix(a.Address); err != nil || p.Addr().Unmap() != addr {
			continue // another address: NetBox's filter is exact, but be sure
		}
		raw = append(raw, a.DNSName)
		raw = append(raw, fieldNames(a.CustomFields[n.field])...)
		if host := hostPath(a); host != "" && n.field != "" && !hosts[host] {
			hosts[host] = true
			more, err := n.hostNames(ctx, host)
			if err != nil {
				return nil, err
			}
			raw = append(raw, more...)
		}
	}
	return names(raw), nil
}

// hostPath is the API path of the device or virtual machine whose
// interface a is assigned to, "" for none (unassigned, or a shared
// address assigned to an FHRP group).
func hostPath(a nbAddress) string {
	if a.AssignedObject == nil || (a.Role != nil && slices.Contains(sharedRoles, a.Role.Value)) {
		return ""
	}
	switch {
	case a.AssignedObjectType == "dcim.interface" && a.AssignedObject.Device != nil:
		return fmt.Sprintf("/api/dcim/devices/%d/", a.AssignedObject.Device.ID)
	case a.AssignedObjectType == "virtualization.vminterface" && a.AssignedObject.VirtualMachine != nil:
		return fmt.Sprintf("/api/virtualization/virtual-machines/%d/", a.AssignedObject.VirtualMachine.ID)
	}
	return ""
}

// hostNames are the names the custom field of the device or virtual
// machine at path lists.
func (n netbox) hostNames(ctx context.Context, path string) ([]string, error) {
	var host struct {
		CustomFields map[string]any `json:"custom_fields"`
	}
	if err := n.getJSON(ctx, path, &host); err != nil {
		return nil, err
	}
	return fieldNames(host.CustomFields[n.field]), nil
}

// getJSON decodes NetBox's 200 answer to path into v.
func (n netbox) getJSON(ctx context.Context, path string, v any) error {
	status, body, err := n.fetch(ctx, path, n.auth)
	if err != nil {
		return fmt.Errorf("netbox: %w", err)
	}
	if status != http.StatusOK {
		return statusErr("netbox", path, status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("netbox: the answer to %s is not NetBox's JSON: %w", path, err)
	}
	return nil
}
