package config

import (
	"errors"
	"net"
	"strconv"
	"strings"
)

// invalidPrefix starts every error Validate returns.
const invalidPrefix = "invalid configuration:\n  "

// ValidateWorker reports the problems of the settings only hallmark-worker
// needs, each naming its key, on top of Validate's. The frontend and the
// CLI never look anything up, so they do not insist on them.
//
// challenge.resolvers is the one today: a worker without resolvers can
// neither validate a challenge nor check CAA (it never asks the system's
// resolver), so it would retry every validation and issuance until each
// was abandoned.
func (c Config) ValidateWorker() error {
	errs := c.workerProblems()
	if len(errs) == 0 {
		return nil
	}
	return errors.New(invalidPrefix + strings.Join(errs, "\n  "))
}

func (c Config) workerProblems() []string {
	var errs []string
	if len(c.Challenge.Resolvers) == 0 {
		errs = append(errs, `challenge.resolvers: the worker needs at least one DNS resolver (host:port, e.g. ["10.0.0.53:53"]) to validate challenges and check CAA; it never uses the system's`)
	}
	for _, r := range c.Challenge.Resolvers {
		host, port, err := net.SplitHostPort(r)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			errs = append(errs, `challenge.resolvers: `+strconv.Quote(r)+` is not host:port (e.g. "10.0.0.53:53")`)
		}
	}
	return errs
}

// LoadWorker is Load for hallmark-worker: Validate's problems and
// ValidateWorker's are reported together.
func LoadWorker(path string) (Config, error) {
	c, err := Load(path)
	problems := c.workerProblems()
	switch {
	case len(problems) == 0:
		return c, err
	case err == nil:
		return c, c.ValidateWorker()
	case strings.HasPrefix(err.Error(), invalidPrefix):
		return c, errors.New(err.Error() + "\n  " + strings.Join(problems, "\n  "))
	default:
		return c, err // the file did not read or decode: c is not what it says
	}
}
