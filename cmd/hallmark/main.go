// Command hallmark is the operator CLI: migrate the database, start a local
// CA for trying Hallmark out (`hallmark up`), and inspect and revoke. It talks
// to the database named by the same configuration file as the servers and
// never builds a signer (the layering test enforces it): work that needs a
// key is queued for a worker.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/hallmark-ca/hallmark/cmd/internal/process"
	"github.com/hallmark-ca/hallmark/cmd/internal/version"
	"github.com/hallmark-ca/hallmark/store/redact"
)

func main() {
	app := &cli.App{
		Name:    "hallmark",
		Usage:   "operate a Hallmark ACME CA",
		Version: version.Get().String(),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HALLMARK_CONFIG"}, Usage: "configuration file (TOML)"},
		},
		Commands: []*cli.Command{
			migrateCommand(),
			upCommand(),
			revokeCommand(),
			accountsCommand(),
			pausesCommand(),
			issuersCommand(),
			ordersCommand(),
			certsCommand(),
			jobsCommand(),
			crlCommand(),
			eabCommand(),
			keysCommand(),
			backupCommand(),
			ariCommand(),
			auditCommand(),
			operatorsCommand(),
			policyCommand(),
			reloadCommand(),
			version.Command("hallmark"),
		},
	}
	cli.ErrWriter = process.MaskedStderr()
	app.ExitErrHandler = printExit
	app.OnUsageError = usageError
	app.CommandNotFound = commandNotFound
	for _, c := range app.Commands {
		onUsage(c)
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "hallmark:", redact.Text(err.Error()))
		os.Exit(1)
	}
}

// printExit prints an action's error as one line on stderr, secrets masked,
// and exits with its code (docs/cli.md lists them): 1 unless the error
// carries another.
func printExit(_ *cli.Context, err error) {
	if err == nil {
		return
	}
	code := exitError
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		code = ec.ExitCode()
	}
	if msg := redact.Text(err.Error()); msg != "" {
		fmt.Fprintln(os.Stderr, "hallmark:", msg)
	}
	os.Exit(code)
}

// commandNotFound makes an unknown command or subcommand a usage error
// (exit 2), naming the help that lists the right ones; urfave/cli's own
// answer ("No help topic for ...") exits 3, which the CLI keeps for a
// record that does not exist.
func commandNotFound(c *cli.Context, name string) {
	where := "hallmark"
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		where += " " + c.Command.Name
	}
	fmt.Fprintf(os.Stderr, "hallmark: %q is not a command of `%s`; `%s --help` lists them\n", name, where, where)
	os.Exit(2)
}

// usageError makes a bad flag exit 2, as scripts expect of a usage error.
func usageError(c *cli.Context, err error, _ bool) error {
	name := "hallmark"
	if c.Command != nil && c.Command.FullName() != "" {
		name += " " + c.Command.FullName()
	}
	return cli.Exit(fmt.Sprintf("%v; see `%s --help`", err, name), exitUsage)
}

func onUsage(c *cli.Command) {
	c.OnUsageError = usageError
	for _, sub := range c.Subcommands {
		onUsage(sub)
	}
}
