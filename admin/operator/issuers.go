package operator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hallmark-ca/hallmark/store"
)

// IssuerStore is what the issuer actions write.
type IssuerStore interface {
	IssuerRecordsList(ctx context.Context) ([]store.IssuerRecord, error)
	IssuerRotate(ctx context.Context, profile string, to []string, ev store.AuditEvent) ([]string, error)
	IssuerRetire(ctx context.Context, id string, ev store.AuditEvent) (store.IssuerState, error)
}

// RotateIssuers makes to the issuers profile signs with; the issuers no
// profile names any longer become retiring (returned). Audited as
// issuer.rotate. keys is where the profile's issuers' keys are
// (profile.Profile.IssuerKeys). An unknown or inactive issuer, or one
// whose key is elsewhere, is refused (ErrNotFound, ErrConflict) and
// nothing changes.
func RotateIssuers(ctx context.Context, st IssuerStore, profile, keys string, to []string, actor string) ([]string, error) {
	if profile == "" || len(to) == 0 {
		return nil, errors.New("name a profile and at least one issuer")
	}
	recs, err := st.IssuerRecordsList(ctx)
	if err != nil {
		return nil, err
	}
	if err := issuerKeysAt(recs, keys, to); err != nil {
		return nil, err
	}
	ev := store.AuditEvent{Actor: actor, Action: "issuer.rotate", Subject: profile,
		Detail: "profile " + profile + " signs with " + strings.Join(to, ", ")}
	retiring, err := st.IssuerRotate(ctx, profile, to, ev)
	if err != nil {
		return nil, err
	}
	return retiring, nil
}

// issuerKeysAt refuses to rotate a profile whose issuers' keys are at
// keys (store.IssuerRecord.Backend: "" for ca.dir, a pkcs11 backend's name
// for its token) to an issuer whose key is elsewhere, which no worker
// serving the profile could sign with; recs are the issuer records. An
// issuer without a record is left to the rotation to refuse.
func issuerKeysAt(recs []store.IssuerRecord, keys string, to []string) error {
	for _, id := range to {
		for _, r := range recs {
			if r.ID != id || r.Backend == keys {
				continue
			}
			return fmt.Errorf("issuer %s has its key %s, the profile's issuers theirs %s: %w", id, keysPlace(r.Backend), keysPlace(keys), store.ErrConflict)
		}
	}
	return nil
}

func keysPlace(backend string) string {
	if backend == "" {
		return "in ca.dir"
	}
	return "on the token of backend " + backend
}

// RetireIssuer moves an issuer on: active (named by no profile) to
// retiring, retiring (no certificate outstanding) to retired. Audited as
// issuer.retire.
func RetireIssuer(ctx context.Context, st IssuerStore, id, actor string) (store.IssuerState, error) {
	if !store.Storable(id) || id == "" {
		return "", fmt.Errorf("%q is not an issuer id", id)
	}
	return st.IssuerRetire(ctx, id, store.AuditEvent{Actor: actor, Action: "issuer.retire", Subject: id})
}

// IssuerKeyTypes are the key types `hallmark-worker ca intermediate` makes
// (signer.KeyTypes, which this package may not link).
var IssuerKeyTypes = []string{"p256", "p384", "rsa2048", "rsa3072", "rsa4096"}

// NewIssuer is what CreateIssuer asks hallmark-worker to make.
type NewIssuer struct {
	Worker  string // the hallmark-worker binary (WorkerBeside)
	Config  string // the configuration file both read; "" for the defaults
	Name    string // the intermediate's common name
	KeyType string // one of IssuerKeyTypes
	Actor   string // who asked, for the audit log
	// PKCS11, when set, is the [backends.<name>] (type pkcs11) on whose
	// token the key is generated, under KeyLabel (a new label when empty).
	PKCS11   string
	KeyLabel string
}

// createdIssuer is the line `hallmark-worker ca intermediate` prints.
var createdIssuer = regexp.MustCompile(`(?m)^created issuer ([0-9a-f]+):`)

// CreateIssuer makes a new intermediate under the root of ca.dir by running
// `hallmark-worker ca intermediate`, which generates the key (in ca.dir, or
// on the token of the pkcs11 backend n.PKCS11), has the root
// sign it, records the issuer and audits issuer.create as n.Actor: the
// CLI's path and the panel's, so neither process ever holds a key (the CLI
// and the frontend link no signer). It returns the new issuer's id and what
// the command printed.
func CreateIssuer(ctx context.Context, n NewIssuer) (id, output string, err error) {
	if n.Name == "" || len(n.Name) > 64 || strings.ContainsFunc(n.Name, unicode.IsControl) {
		return "", "", fmt.Errorf("the name %q is not a common name of 1 to 64 printable characters", n.Name)
	}
	if !slices.Contains(IssuerKeyTypes, n.KeyType) {
		return "", "", fmt.Errorf("key type %q is not one of %v", n.KeyType, IssuerKeyTypes)
	}
	if _, err := os.Stat(n.Worker); err != nil {
		return "", "", fmt.Errorf("%s is missing (%v): it makes the key, and must sit beside this binary (make build)", n.Worker, err)
	}
	// --flag=value: a name starting with "-" stays the flag's value.
	args := []string{"ca", "intermediate", "--name=" + n.Name, "--key-type=" + n.KeyType, "--actor=" + n.Actor}
	if n.PKCS11 != "" {
		args = append(args, "--pkcs11="+n.PKCS11)
	}
	if n.KeyLabel != "" {
		if n.PKCS11 == "" {
			return "", "", errors.New("a key label names a key on a token: name its backend (--pkcs11)")
		}
		args = append(args, "--key-label="+n.KeyLabel)
	}
	if n.Config != "" {
		args = append([]string{"--config", n.Config}, args...)
	}
	out, err := exec.CommandContext(ctx, n.Worker, args...).CombinedOutput()
	if err != nil {
		return "", string(out), fmt.Errorf("hallmark-worker ca intermediate: %v: %s", err, strings.TrimSpace(string(out)))
	}
	m := createdIssuer.FindSubmatch(out)
	if m == nil {
		return "", string(out), fmt.Errorf("hallmark-worker ca intermediate printed no issuer id: %s", strings.TrimSpace(string(out)))
	}
	return string(m[1]), string(out), nil
}

// WorkerBeside is the hallmark-worker binary in this binary's directory.
func WorkerBeside() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(self), "hallmark-worker"), nil
}

// IssuerLine is an issuer as `hallmark issuers list --json` and the API's
// issuers list it.
type IssuerLine struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	KeyType     string    `json:"key_type"`
	Backend     string    `json:"backend,omitempty"`   // the pkcs11 backend whose token holds the key; none for ca.dir
	KeyLabel    string    `json:"key_label,omitempty"` // the key's label on that token
	State       string    `json:"state"`
	Profiles    []string  `json:"profiles"`
	Outstanding int       `json:"outstanding"`
	Chains      int       `json:"alternate_chains"`
	NotAfter    time.Time `json:"not_after"`
	CreatedAt   time.Time `json:"created_at"`
}

// IssuerLineOf is r as an IssuerLine.
func IssuerLineOf(r store.IssuerRecord) IssuerLine {
	profs := r.Profiles
	if profs == nil {
		profs = []string{}
	}
	return IssuerLine{ID: r.ID, Name: r.Name, KeyType: r.KeyType, Backend: r.Backend, KeyLabel: r.KeyLabel, State: string(r.State),
		Profiles: profs, Outstanding: r.Outstanding, Chains: len(r.Chains), NotAfter: r.NotAfter.UTC(), CreatedAt: r.CreatedAt.UTC()}
}
