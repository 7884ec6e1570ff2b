package admin

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/admin/operator"
	"github.com/hallmark-ca/hallmark/store"
)

// The API's pauses, blocked keys, audit log and issuers: what the panel's
// pauses, keys, audit and issuers pages show and do, and the audit export
// of `hallmark audit export`.

// keyStore is what the blocked keys endpoints read and change
// (store.BlockedKeys).
type keyStore interface {
	KeysBlocked(ctx context.Context, limit int) ([]store.BlockedKey, error)
	KeyBlock(ctx context.Context, k store.BlockedKey) (store.KeyBlockResult, error)
	KeyUnblock(ctx context.Context, spkiHash []byte, ev store.AuditEvent) error
}

// apiPauses lists the paused accounts by the [limits] rule, oldest first;
// account= narrows to one, all=yes keeps the runs not paused (yet).
func (s *Server) apiPauses(r *http.Request, _ principal) (any, error) {
	q := r.URL.Query()
	f := store.PauseFilter{AccountID: q.Get("account"), All: q.Get("all") == "yes"}
	l, next, err := s.st.pauses.PausesList(r.Context(), s.pause, f, pageOf(r))
	if err != nil {
		return nil, err
	}
	out := make([]operator.PauseLine, len(l))
	for i, p := range l {
		out[i] = operator.PauseLineOf(p)
	}
	return list{out, next}, nil
}

// apiPauseLift is the pauses page's Lift: {"account": ID} lifts every
// identifier's pause, with "identifier" one's.
func (s *Server) apiPauseLift(r *http.Request, p principal) (any, error) {
	var body struct {
		Account    string `json:"account"`
		Identifier string `json:"identifier"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.Account == "" || !store.Storable(body.Account) || !store.Storable(body.Identifier) {
		return nil, apiErr(http.StatusBadRequest, `the body must be {"account": ID} or {"account": ID, "identifier": "dns:NAME"}`)
	}
	n, err := operator.LiftPause(r.Context(), s.st.pauses, body.Account, body.Identifier, "admin:"+p.user)
	if errors.Is(err, operator.ErrBadIdentifier) {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	return nothingToDo(map[string]any{"account": body.Account, "lifted": n}, err)
}

// keyRow is a blocked key as the API lists it.
type keyRow struct {
	SPKISHA256 string    `json:"spki_sha256"`
	BlockedAt  time.Time `json:"blocked_at"`
	Serial     string    `json:"serial,omitempty"`
	Why        string    `json:"why"`
	Actor      string    `json:"actor"`
}

func keyRowOf(b store.BlockedKey) keyRow {
	return keyRow{b.Hex(), b.BlockedAt, b.Serial, b.Why, b.Actor}
}

// apiKeys lists the blocked keys, the latest first: limit= of them (500
// unless said; 0 for all).
func (s *Server) apiKeys(r *http.Request, _ principal) (any, error) {
	limit := keysShown
	if l := r.URL.Query().Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return nil, apiErr(http.StatusBadRequest, "limit must be 0 (all) or more")
		}
		limit = n
	}
	l, err := s.st.keys.KeysBlocked(r.Context(), limit)
	if err != nil {
		return nil, err
	}
	out := make([]keyRow, len(l))
	for i, b := range l {
		out[i] = keyRowOf(b)
	}
	return list{Items: out}, nil
}

// spkiHash reads a key's SHA-256 of its SubjectPublicKeyInfo, hex.
func spkiHash(v string) ([]byte, error) {
	h, ok := store.ParseKeyHash(v)
	if !ok {
		return nil, apiErr(http.StatusBadRequest, "a key is named by the SHA-256 of its SubjectPublicKeyInfo, 64 hex digits (`hallmark keys show --cert FILE` prints it)")
	}
	return h, nil
}

// apiKeyBlock blocks a key reported compromised and revokes its unexpired
// certificates, as `hallmark keys block`: {"spki_sha256": HEX, "source":
// "who reported it and how"}.
func (s *Server) apiKeyBlock(r *http.Request, p principal) (any, error) {
	var body struct {
		SPKI   string `json:"spki_sha256"`
		Source string `json:"source"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, apiErr(http.StatusBadRequest, `the body must be {"spki_sha256": HEX, "source": "who reported it"}`)
	}
	h, err := spkiHash(body.SPKI)
	if err != nil {
		return nil, err
	}
	why := "reported to the operator (admin API)"
	if src := strings.TrimSpace(body.Source); src != "" {
		if !store.Storable(src) {
			return nil, apiErr(http.StatusBadRequest, "the source holds a character the store cannot keep")
		}
		why += ": " + src
	}
	res, err := s.st.keys.KeyBlock(r.Context(), store.BlockedKey{SPKIHash: h, Why: why, Actor: "admin:" + p.user})
	if err != nil {
		return nil, err
	}
	serials := func(cs []*store.Certificate) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Serial
		}
		return out
	}
	return map[string]any{"key": keyRowOf(res.Key), "already_blocked": res.Already, "revoked": serials(res.Revoked), "queued": serials(res.Queued)}, nil
}

// apiKeyUnblock removes a key's block (one recorded by mistake): the key
// may be certified again; what its block revoked stays revoked.
func (s *Server) apiKeyUnblock(r *http.Request, p principal) (any, error) {
	h, err := spkiHash(r.PathValue("spki"))
	if err != nil {
		return nil, err
	}
	hx := hex.EncodeToString(h)
	err = operator.UnblockKey(r.Context(), s.st.keys, h, "through the admin API", "admin:"+p.user)
	if errors.Is(err, store.ErrNotFound) {
		return nil, apiErr(http.StatusNotFound, "key %s is not blocked", hx)
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"spki_sha256": hx, "unblocked": true}, nil
}

// auditFilter reads the audit page's filters: kind (trail, operator or an
// action), since (a date or RFC 3339) and request (a request id).
func auditFilter(r *http.Request) (store.AuditFilter, error) {
	q := r.URL.Query()
	f := store.AuditFilter{RequestID: strings.TrimSpace(q.Get("request"))}
	switch kind := strings.TrimSpace(q.Get("kind")); kind {
	case "":
	case "trail", "operator":
		f.Trail = ptr(kind == "trail")
	default:
		f.Action = kind
	}
	if d := q.Get("since"); d != "" {
		t, err := time.Parse(time.RFC3339, d)
		if err != nil {
			if t, err = time.Parse("2006-01-02", d); err != nil {
				return f, errBadRequest("since must be a date (2006-01-02) or RFC 3339")
			}
		}
		f.Since = t
	}
	return f, nil
}

// apiAudit lists the audit log, newest first, filtered as the audit page.
func (s *Server) apiAudit(r *http.Request, _ principal) (any, error) {
	f, err := auditFilter(r)
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	evs, next, err := s.st.pages.AuditFind(r.Context(), f, pageOf(r))
	if err != nil {
		return nil, err
	}
	out := make([]operator.AuditLine, len(evs))
	for i, e := range evs {
		out[i] = operator.AuditLineOf(e)
	}
	return list{out, next}, nil
}

// jsonLines is an answer written as JSON lines (application/x-ndjson)
// rather than one JSON value.
type jsonLines func(w io.Writer) error

// apiAuditExport is `hallmark audit export`: every event with an id above
// after=, oldest first, one JSON object a line, with its place in its
// chain, for a SIEM.
func (s *Server) apiAuditExport(r *http.Request, _ principal) (any, error) {
	var after int64
	if a := r.URL.Query().Get("after"); a != "" {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil || n < 0 {
			return nil, apiErr(http.StatusBadRequest, "after must be the id of the last event exported")
		}
		after = n
	}
	return jsonLines(func(w io.Writer) error {
		_, err := operator.ExportAudit(r.Context(), s.st.audit, after, w)
		return err
	}), nil
}

// apiIssuers lists the managed issuers, as the issuers page does.
func (s *Server) apiIssuers(r *http.Request, _ principal) (any, error) {
	recs, err := s.st.issuers.IssuerRecordsList(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]operator.IssuerLine, len(recs))
	for i, rec := range recs {
		out[i] = operator.IssuerLineOf(rec)
	}
	return list{Items: out}, nil
}
