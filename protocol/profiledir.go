package protocol

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// A directory per profile: /profile/<name>/directory names newOrder (and
// newAuthz, if the profile allows pre-authorization) URLs that select the
// profile themselves, for clients that cannot send the "profile" field of
// draft-ietf-acme-profiles (certbot 2.1, among others). The other
// resources are shared with /directory.
const (
	pathProfile      = "/profile/"
	profileDirectory = "/directory"
	profileNewOrder  = "/new-order"
	profileNewAuthz  = "/new-authz"
)

// routeProfile is the profile a per-profile route names, "" on the
// shared routes.
func routeProfile(r *http.Request) string {
	if r == nil {
		return ""
	}
	return mux.Vars(r)["profile"]
}

// presetProfile applies a per-profile route's profile to a payload's
// profile field. That directory advertises only its own profile, so a
// field naming another is a profile this directory does not offer:
// invalidProfile, as draft-ietf-acme-profiles §3 has it for one the
// server does not advertise.
func (s *Server) presetProfile(r *http.Request, asked *string) error {
	name := routeProfile(r)
	if name == "" {
		return nil
	}
	if *asked != "" && *asked != name {
		return acme.New(acme.ProblemInvalidProfile,
			"this URL is profile %q's (directory %s); leave \"profile\" out, or send %q to the URL of %s",
			name, s.profileDirURL(name), *asked, s.base+pathDirectory)
	}
	*asked = name
	return nil
}

// knownProfile answers 404 for a per-profile route whose profile is not
// configured, before anything else reads the request (a nonce is not
// consumed for it).
func (s *Server) knownProfile(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.profile(routeProfile(r)); !ok {
			s.instrument("not_found", false, func(http.ResponseWriter, *http.Request) error {
				return malformedAs(http.StatusNotFound, "there is no profile %q; this server's directory is %s", routeProfile(r), s.base+pathDirectory)
			}).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *Server) profileDirURL(name string) string {
	return s.base + pathProfile + name + profileDirectory
}

// profileDirectory is /profile/<name>/directory: the shared directory with
// the profile's newOrder and newAuthz, and meta.profiles naming only it.
func (s *Server) profileDirectory(w http.ResponseWriter, r *http.Request) error {
	name := routeProfile(r)
	prof, _ := s.profile(name) // knownProfile checked it
	doc := s.directoryDoc()
	doc.NewOrder = s.base + pathProfile + name + profileNewOrder
	doc.NewAuthz = ""
	if prof.AllowPreAuthorization {
		doc.NewAuthz = s.base + pathProfile + name + profileNewAuthz
	}
	doc.Meta.Profiles = map[string]string{name: prof.Description}
	return writeJSON(w, http.StatusOK, doc)
}
