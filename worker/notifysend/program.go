package notifysend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/jobs/notify"
)

// program runs a command with the event as JSON on its stdin, in an empty
// environment but for the names configured. Exit status 0 is delivered;
// any other, or a timeout, is retried.
type program struct{ d notify.Destination }

func (p program) send(ctx context.Context, m notify.Message) error {
	in, err := json.Marshal(m)
	if err != nil {
		return &permanent{err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(p.d.TimeoutMS)*time.Millisecond)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.d.Command[0], p.d.Command[1:]...)
	cmd.Env = []string{}
	for _, name := range p.d.Env {
		if v, ok := os.LookupEnv(name); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 512 {
			msg = msg[:512]
		}
		return fmt.Errorf("%s: %w: %q", p.d.Command[0], err, msg)
	}
	return nil
}
