package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The files `hallmark up` writes beside its configuration, once, for the
// dev DNS: the zone file it serves and a hook that lets lego's exec DNS
// provider publish dns-01 records in it.
const (
	devZoneFile = "dev.zone"
	devZoneHook = "dev-zone-hook"
)

// devZone is the zone file written on first run; %[1]s is the CA's CAA
// identity (server.caa_identities), %[2]s the dev DNS's address.
const devZone = `; The zone file of the dev DNS that 'hallmark up' runs on %[2]s. It is
; read again whenever it changes (a line that does not parse is reported in
; hallmark up's output, and the records read before are kept). RFC 1035
; syntax; a name without a trailing dot is under $ORIGIN. A record here
; answers beside the dev DNS's own A 127.0.0.1 for every *.localhost name,
; and wins over it for its name and type.
$ORIGIN localhost.
$TTL 60

; dns-01 (RFC 8555 8.4): lego's exec provider, with EXEC_PATH=hallmark-data/%[3]s,
; appends the challenge's TXT record here and deletes it afterwards (README.md).
; _acme-challenge.dns TXT "the base64url SHA-256 digest of the key authorization"

; CAA (RFC 8659): let only this CA issue for caa.localhost and its subdomains.
; caa CAA 0 issue "%[1]s"
`

// devZoneHookScript is lego's exec DNS provider protocol
// (present|cleanup <fqdn> <value>) over the zone file beside it.
const devZoneHookScript = `#!/bin/sh
# Written by 'hallmark up': lego's exec DNS provider (EXEC_PATH) for the dev
# DNS. "present <fqdn> <value>" adds the TXT record to dev.zone beside this
# file, "cleanup <fqdn> <value>" deletes it; the dev DNS re-reads the file.
set -eu
zone="$(dirname "$0")/dev.zone"
line="$2 60 IN TXT \"$3\""
case "$1" in
present) printf '%s\n' "$line" >> "$zone" ;;
cleanup) { grep -vxF "$line" "$zone" || true; } > "$zone.tmp" && mv "$zone.tmp" "$zone" ;;
*) echo "usage: $0 present|cleanup <fqdn> <value>" >&2; exit 2 ;;
esac
`

// writeDevZone writes the zone file and its hook into data unless they
// exist.
func writeDevZone(data, caaIdentity, dnsAddr string) error {
	for _, f := range []struct {
		name, text string
		mode       os.FileMode
	}{
		{devZoneFile, fmt.Sprintf(devZone, caaIdentity, dnsAddr, devZoneHook), 0o644},
		{devZoneHook, devZoneHookScript, 0o755},
	} {
		p := filepath.Join(data, f.name)
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.WriteFile(p, []byte(f.text), f.mode); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}
