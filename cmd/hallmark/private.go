package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/config"
)

// openBits are the permission bits that let the group or others in.
const openBits = 0o077

// checkDataDir refuses an existing data directory the group or others may
// enter or list: it holds the CA's keys and the database. `hallmark up`
// refuses rather than tightening it, because the directory may be shared
// with other uses (--data /tmp) and whatever was readable may have been
// read already; the message names the path and the command that fixes it.
func checkDataDir(data string) error {
	fi, err := os.Stat(data)
	if err != nil {
		return fmt.Errorf("reading %s: %w", data, err)
	}
	if !fi.IsDir() {
		return cli.Exit(fmt.Sprintf("--data %s is not a directory", data), exitUsage)
	}
	if perm := fi.Mode().Perm(); perm&openBits != 0 {
		return cli.Exit(fmt.Sprintf("the data directory %s is mode %04o: the group or others can reach the CA's keys and the database in it; "+
			"run `chmod 700 %s` (if others share this machine, consider its keys exposed: start over with a new --data) and run `hallmark up` again",
			data, perm, data), exitUsage)
	}
	return nil
}

// checkKeyFiles refuses key files the group or others may read: the
// frontend's TLS key, the admin token, the backends' PIN files and relay
// account keys, and every *.key under the data directory and ca.dir. It
// names each with its mode and the chmod that fixes them all.
func checkKeyFiles(cfg config.Config, data string) error {
	named := []string{cfg.Server.TLSKey, cfg.Admin.TokenFile}
	for _, b := range cfg.Backends {
		named = append(named, b.PINFile, b.AccountKey)
	}
	open := map[string]fs.FileMode{}
	look := func(p string) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&openBits != 0 {
			open[p] = fi.Mode().Perm()
		}
	}
	for _, p := range named {
		if p != "" {
			look(p)
		}
	}
	for _, root := range []string{data, cfg.CA.Dir} {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".key") {
				look(p)
			}
			return nil
		})
	}
	if len(open) == 0 {
		return nil
	}
	paths := make([]string, 0, len(open))
	for p := range open {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	modes := make([]string, len(paths))
	for i, p := range paths {
		modes[i] = fmt.Sprintf("%s (%04o)", p, open[p])
	}
	return cli.Exit(fmt.Sprintf("key files the group or others can read: %s; run `chmod 600 %s` and run `hallmark up` again",
		strings.Join(modes, ", "), strings.Join(paths, " ")), exitUsage)
}
