package postgres_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises the default parallelism: each contract test spends its
// time waiting on PostgreSQL (CREATE DATABASE, migrations, DROP DATABASE),
// not on the CPU, so GOMAXPROCS-many at a time leaves the machine idle. An
// explicit -test.parallel wins.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", "8")
	}
	os.Exit(m.Run())
}
