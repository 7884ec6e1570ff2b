// Package dist tests what `make dist` ships: the release tarball, and the
// Debian package installed on this machine with dpkg, its systemd units
// checked by systemd-analyze and run by their own ExecStart lines, as the
// units' user, against SQLite and PostgreSQL, until lego holds a
// certificate. It needs root, dpkg and systemd-analyze (Debian's systemd
// package) and changes the machine while it runs (a package, a system
// user, /etc/hallmark, /var/lib/hallmark), so it runs only in CI or with
// HALLMARK_REQUIRE_TOOLS=1, one run per machine at a time, and puts the
// machine back as it found it. The unit files' own checks run everywhere.
package dist
