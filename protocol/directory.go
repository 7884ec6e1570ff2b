package protocol

import (
	"net/http"
	"slices"
	"strings"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// directoryDoc is the directory object (RFC 8555 §7.1.1) with renewalInfo
// (RFC 9773 §3). newAuthz is there only when the default profile allows
// pre-authorization.
type directoryDoc struct {
	NewNonce    string        `json:"newNonce"`
	NewAccount  string        `json:"newAccount"`
	NewOrder    string        `json:"newOrder"`
	RevokeCert  string        `json:"revokeCert"`
	KeyChange   string        `json:"keyChange"`
	NewAuthz    string        `json:"newAuthz,omitempty"`
	RenewalInfo string        `json:"renewalInfo"`
	Meta        directoryMeta `json:"meta"`
}

type directoryMeta struct {
	TermsOfService          string            `json:"termsOfService,omitempty"`
	Website                 string            `json:"website,omitempty"`
	CAAIdentities           []string          `json:"caaIdentities,omitempty"`
	ExternalAccountRequired bool              `json:"externalAccountRequired"`
	Profiles                map[string]string `json:"profiles,omitempty"` // draft-ietf-acme-profiles: name → description
	// dns-persist-01 (draft-ietf-acme-dns-persist-02 §3.2, §4.1), when a
	// profile offers it: what a record may name this CA by, and where its
	// hashed account URIs live.
	IssuerDomainNames []string `json:"issuerDomainNames,omitempty"`
	AccountHashPrefix string   `json:"accountHashPrefix,omitempty"`
}

func (s *Server) directory(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, s.directoryDoc())
}

// directoryDoc is /directory; profiledir.go derives each profile's from it.
func (s *Server) directoryDoc() directoryDoc {
	profiles := make(map[string]string, len(s.cfg.Profiles))
	persist := false
	for name, p := range s.cfg.Profiles {
		profiles[name] = p.Description
		persist = persist || slices.Contains(p.Challenges, string(acme.ChallengeDNSPersist01))
	}
	// The directory is the same for every client and changes only with the
	// configuration; a client may cache it briefly (instrument set no-store
	// for the nonce's sake, which is the safer default).
	d := directoryDoc{
		NewNonce:    s.base + pathNewNonce,
		NewAccount:  s.base + pathNewAccount,
		NewOrder:    s.base + pathNewOrder,
		RevokeCert:  s.base + pathRevokeCert,
		KeyChange:   s.base + pathKeyChange,
		NewAuthz:    s.newAuthzURL(),
		RenewalInfo: s.base + strings.TrimSuffix(pathRenewalInfo, "/"),
		Meta: directoryMeta{
			TermsOfService:          s.cfg.Server.TermsOfService,
			Website:                 s.cfg.Server.Website,
			CAAIdentities:           s.cfg.Server.CAAIdentities,
			ExternalAccountRequired: s.cfg.Server.ExternalAccountRequired,
			Profiles:                profiles,
		},
	}
	if persist {
		d.Meta.IssuerDomainNames = issuerDomainNames(s.cfg.Server.CAAIdentities)
		d.Meta.AccountHashPrefix = s.base + acme.AccountHashPath
	}
	return d
}
