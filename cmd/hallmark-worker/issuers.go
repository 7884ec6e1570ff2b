package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/user"
	"sort"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
	"github.com/hallmark-ca/hallmark/signer"
	"github.com/hallmark-ca/hallmark/store"
	"github.com/hallmark-ca/hallmark/store/open"
	"github.com/hallmark-ca/hallmark/worker"
)

// record is an issuer's record as the worker publishes it.
func record(iss *signer.Issuer) store.IssuerRecord {
	kt, _ := signer.KeyType(iss.Cert.PublicKey)
	return store.IssuerRecord{ID: iss.ID, Name: iss.Cert.Subject.CommonName, KeyType: kt,
		NotAfter: iss.Cert.NotAfter, Chains: iss.AltChainsPEM()}
}

// publishIssuers publishes what the frontend serves of each mounted issuer
// (its certificate at the AIA URL; a local or PKCS#11 one's record, with
// where its key is, and alternate chains too), and makes the mounted issuer
// the one each local or PKCS#11 profile signs with when the store names
// none for it yet (the first start).
func publishIssuers(ctx context.Context, cfg config.Config, st store.Store, issuers map[string]*signer.Issuer, log *slog.Logger) error {
	names := make([]string, 0, len(issuers))
	for n := range issuers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		iss, p := issuers[name], cfg.Profiles[name]
		var rec store.IssuerRecord
		switch p.Backend {
		case "local":
			rec = record(iss)
		case "pkcs11":
			rec = tokenRecord(cfg, p.Signer, iss)
		default:
			if err := st.IssuerPublish(ctx, iss.ID, iss.Cert.Raw); err != nil {
				return err
			}
			continue
		}
		if err := st.IssuerRecordPut(ctx, rec, iss.Cert.Raw, nil); err != nil {
			return err
		}
		named, err := st.ProfileIssuerDefault(ctx, name, iss.ID)
		if err != nil {
			return err
		}
		if !named {
			warnUnnamed(ctx, st, name, iss, log)
		}
	}
	return nil
}

// warnUnnamed tells the operator when the configured issuer (ca.dir's
// intermediate, or a pkcs11 backend's cert) is not among the issuers the
// store names for profile (it was replaced by hand, or rotated away from):
// the profile signs with those, not with it.
func warnUnnamed(ctx context.Context, st store.Store, profile string, iss *signer.Issuer, log *slog.Logger) {
	m, err := st.ProfileIssuers(ctx)
	if err != nil {
		return
	}
	var ids []string
	for _, p := range m[profile] {
		if p.ID == iss.ID {
			return
		}
		ids = append(ids, p.ID)
	}
	log.Warn("the configured issuer is not an issuer of this profile: it signs with the issuers the database names (hallmark issuers list; hallmark issuers rotate to change them)",
		"profile", profile, "intermediate", iss.ID, "issuers", ids)
}

// managedIssuers loads every managed issuer not retired that this worker
// can sign with, so it signs their CRLs (a retiring one's too, which no
// profile names): a local one whose files are in ca.dir, one on the token
// of a pkcs11 backend its profiles use. A mounted one is loaded again, so
// its CRLs outlive a reload that mounts another issuer for its profile.
// It also says how to load one made later, by the configuration current
// returns then.
func managedIssuers(ctx context.Context, current func() config.Config, st store.Store, log *slog.Logger) ([]*signer.Issuer, worker.IssuerLoader, error) {
	cfg := current()
	local := false
	for _, p := range cfg.Profiles {
		local = local || p.Backend == "local"
	}
	tokens := tokenBackends(cfg)
	if !local && len(tokens) == 0 {
		return nil, nil, nil
	}
	load := issuerLoader(current, st)
	recs, err := st.IssuerRecordsList(ctx)
	if err != nil {
		return nil, nil, err
	}
	var out []*signer.Issuer
	for _, r := range recs {
		switch {
		case r.State == store.IssuerRetired:
			continue
		case r.Backend == "" && !local, r.Backend != "" && !tokens[r.Backend]:
			continue
		}
		iss, err := loadRecord(ctx, cfg, st, r)
		if err != nil {
			log.Warn("a managed issuer's key is not here (ca.dir, or its backend's token): this worker neither signs with it nor signs its CRLs", "issuer", r.ID, "backend", r.Backend, "state", r.State, "err", err)
			continue
		}
		out = append(out, iss)
	}
	return out, load, nil
}

// caIntermediate makes a new intermediate under the root of ca.dir, its
// key in ca.dir or, with --pkcs11, on a backend's token, and records it,
// active and named by no profile yet (`hallmark issuers rotate` makes a
// profile sign with it).
func caIntermediate(c *cli.Context) error {
	cfg, err := config.Load(c.String("config"))
	if err != nil {
		return cli.Exit(err.Error(), 2)
	}
	if c.String("key-label") != "" && c.String("pkcs11") == "" {
		return cli.Exit("--key-label names a key on a token: name its backend with --pkcs11", 2)
	}
	var iss *signer.Issuer
	var rec store.IssuerRecord
	if backend := c.String("pkcs11"); backend != "" {
		iss, rec, err = createOnToken(c, cfg, backend)
	} else if iss, err = signer.CreateIntermediate(cfg.CA.Dir, caOptions(cfg, ""), c.String("name"), c.String("key-type")); err == nil {
		rec = record(iss)
	}
	if err != nil {
		return err
	}
	db, err := open.Open(c.Context, cfg.Database.URL, 2)
	if err != nil {
		return fmt.Errorf("the intermediate %s is written to %s but not recorded: %w", iss.ID, cfg.CA.Dir, err)
	}
	defer db.Close()
	actor := c.String("actor")
	if actor == "" {
		actor = "cli:unknown"
		if u, err := user.Current(); err == nil {
			actor = "cli:" + u.Username
		}
	}
	ev := store.AuditEvent{Actor: actor, Action: "issuer.create", Subject: iss.ID,
		Detail: fmt.Sprintf("%s (%s), valid until %s, %d alternate chains", iss.Cert.Subject.CommonName, record(iss).KeyType, iss.Cert.NotAfter.Format("2006-01-02"), len(iss.AltChains))}
	if rec.Backend != "" {
		ev.Detail += fmt.Sprintf(", key %q on the token of backend %s", rec.KeyLabel, rec.Backend)
	}
	if err := db.Store.IssuerRecordPut(c.Context, rec, iss.Cert.Raw, &ev); err != nil {
		return err
	}
	if _, err := publishRootCRLs(c.Context, db.Store, cfg.CA.Dir); err != nil {
		return err
	}
	fmt.Printf("created issuer %s: %s (%s), %d alternate chains\n", iss.ID, iss.Cert.Subject.CommonName, rec.KeyType, len(iss.AltChains))
	if rec.Backend != "" {
		fmt.Printf("its key is on the token of backend %s: label %q, id %s\n", rec.Backend, rec.KeyLabel, rec.KeyID)
	}
	fmt.Printf("make a profile sign with it: hallmark issuers rotate --profile <name> %s\n", iss.ID)
	return nil
}

// caCrossRoot makes the cross root of `ca init --cross-root`.
func caCrossRoot(cfg config.Config, name string) error {
	root, err := signer.InitCrossRoot(cfg.CA.Dir, caOptions(cfg, name))
	if errors.Is(err, signer.ErrExists) {
		fmt.Printf("cross root already exists in %s (left unchanged)\n", cfg.CA.Dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("cross root certificate: %s (it cross-signs the intermediate)\n", root)
	return nil
}
