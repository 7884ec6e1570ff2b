package ipam

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// phpipam asks phpIPAM's REST API for the address's records.
type phpipam struct {
	client
	app string
}

// phpEnvelope is every phpIPAM API answer.
type phpEnvelope struct {
	Code    int             `json:"code"`
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (p phpipam) auth(h http.Header) { h.Set("token", p.token) }

// Names: every record of the address gives its hostname and its custom
// field's names (phpIPAM returns custom fields as custom_<name>; either
// spelling may be configured).
func (p phpipam) Names(ctx context.Context, addr netip.Addr) ([]string, error) {
	addr = addr.Unmap()
	path := fmt.Sprintf("/api/%s/addresses/search/%s/", p.app, addr)
	status, body, err := p.fetch(ctx, path, p.auth)
	if err != nil {
		return nil, fmt.Errorf("phpipam: %w", err)
	}
	var env phpEnvelope
	jerr := json.Unmarshal(body, &env)
	switch {
	case jerr == nil && status == http.StatusNotFound && env.Code == http.StatusNotFound && !env.Success &&
		strings.Contains(strings.ToLower(env.Message), "not found"):
		return []string{}, nil // "Address not found"
	case status != http.StatusOK:
		if jerr == nil && env.Message != "" {
			return nil, fmt.Errorf("%w: %s", statusErr("phpipam", path, status), env.Message)
		}
		return nil, statusErr("phpipam", path, status)
	case jerr != nil || env.Code == 0:
		return nil, fmt.Errorf("phpipam: the answer to %s is not phpIPAM's API JSON; check url and app_id", path)
	case !env.Success:
		return nil, fmt.Errorf("phpipam: %s answered code %d: %s", path, env.Code, env.Message)
	}
	var recs []map[string]any
	if len(env.Data) > 0 && string(env.Data) != "null" {
		if err := json.Unmarshal(env.Data, &recs); err != nil {
			return nil, fmt.Errorf("phpipam: the data of the answer to %s is no list of addresses: %w", path, err)
		}
	}
	field := p.field
	if field != "" && !strings.HasPrefix(field, "custom_") {
		field = "custom_" + field
	}
	var raw []string
	for _, r := range recs {
		if ip, _ := r["ip"].(string); ip != "" {
			if a, err := netip.ParseAddr(ip); err != nil || a.Unmap() != addr {
				continue
			}
		}
		if h, ok := r["hostname"].(string); ok {
			raw = append(raw, h)
		}
		if field != "" {
			raw = append(raw, fieldNames(r[field])...)
		}
	}
	return names(raw), nil
}
