package admin

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/hallmark-ca/hallmark/tests/harness"
)

// renewalInfo fetches RFC 9773 renewal information for cert from the real
// frontend, as an ARI client does: directory, then renewalInfo/<certID>
// (§4.1: the issuer's key identifier and the serial's DER value octets).
func renewalInfo(t *testing.T, c *harness.CA, cert *x509.Certificate) (start, end time.Time, explanation string) {
	t.Helper()
	hc := c.HTTPClient()
	resp, err := hc.Get(c.BaseURL + "/directory")
	if err != nil {
		t.Fatal(err)
	}
	var dir struct {
		RenewalInfo string `json:"renewalInfo"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&dir)
	resp.Body.Close()
	ser := cert.SerialNumber.Bytes()
	if ser[0]&0x80 != 0 {
		ser = append([]byte{0}, ser...)
	}
	id := base64.RawURLEncoding.EncodeToString(cert.AuthorityKeyId) + "." + base64.RawURLEncoding.EncodeToString(ser)
	resp, err = hc.Get(dir.RenewalInfo + "/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("renewalInfo %s: %d %s", id, resp.StatusCode, b)
	}
	var ri struct {
		SuggestedWindow struct{ Start, End time.Time } `json:"suggestedWindow"`
		ExplanationURL  string                         `json:"explanationURL"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ri); err != nil {
		t.Fatal(err)
	}
	return ri.SuggestedWindow.Start, ri.SuggestedWindow.End, ri.ExplanationURL
}
