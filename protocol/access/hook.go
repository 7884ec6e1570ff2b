package access

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hallmark-ca/hallmark/protocol/acme"
)

// HookVersion is the version of the hook's input; a change that would
// break a hook gets a new one.
const HookVersion = 1

// HookInput is what a hook reads on stdin: one JSON object.
type HookInput struct {
	Version     int               `json:"version"`
	Check       string            `json:"check"`
	Route       string            `json:"route"` // new_account, new_order, new_authz, challenge, finalize, ...
	Client      HookClient        `json:"client"`
	Account     *HookAccount      `json:"account,omitempty"`     // on = "account" or "order"
	Identifiers []acme.Identifier `json:"identifiers,omitempty"` // on = "order"
	Profile     string            `json:"profile,omitempty"`     // on = "order"
}

// HookClient is where the request came from.
type HookClient struct {
	Address   string   `json:"address"` // "" when a trusted proxy's header did not parse
	Peer      string   `json:"peer"`
	Forwarded []string `json:"forwarded,omitempty"`
}

// HookAccount is the account that signed the request.
type HookAccount struct {
	ID       string `json:"id"`
	EABKeyID string `json:"eab_key_id,omitempty"`
	EABLabel string `json:"eab_label,omitempty"`
}

// HookOutput is what a hook may write on stdout.
type HookOutput struct {
	Answer string `json:"answer"` // "allow", "deny" or "unknown"
	Reason string `json:"reason"` // for the log and explain, never the client
}

// maxHookOutput bounds what is read of a hook's stdout and stderr.
const maxHookOutput = 64 << 10

// hookCheck runs an operator's program: the request as HookInput on its
// stdin, with an empty environment but for env, killed (with everything
// it started) at the timeout. Its answer is stdout's HookOutput when it
// writes anything there, else its exit status: 0 allow, 1 deny, anything
// else unknown. A hook that is killed or writes something else is unknown.
type hookCheck struct {
	name    string
	argv    []string
	env     []string
	timeout time.Duration
}

func newHookCheck(name string, c Check) hookCheck {
	env := []string{} // not nil: nil would hand the hook the frontend's environment
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, k+"="+c.Env[k])
	}
	return hookCheck{name: name, argv: c.Command, env: env, timeout: time.Duration(orDefault(c.TimeoutMS, DefaultHookTimeoutMS)) * time.Millisecond}
}

func (h hookCheck) check(ctx context.Context, f *Facts) Result {
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	input := hookInput(ctx, f)
	input.Check = h.name
	in, err := json.Marshal(input)
	if err != nil {
		return Result{Answer: Unknown, Detail: err.Error()}
	}
	cmd := exec.CommandContext(ctx, h.argv[0], h.argv[1:]...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = h.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 200 * time.Millisecond
	err = cmd.Run()
	if ctx.Err() != nil {
		return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s did not answer within %s and was killed%s", h.argv[0], h.timeout, stderr.tail())}
	}
	// The exit status, also when a child the hook left behind kept its
	// output open (exec.ErrWaitDelay): the hook itself has answered.
	code := -1
	if cmd.ProcessState != nil && cmd.ProcessState.Exited() {
		code = cmd.ProcessState.ExitCode()
	}
	if out := bytes.TrimSpace(stdout.b.Bytes()); len(out) > 0 {
		return h.parse(out, code, &stdout, &stderr)
	}
	switch code {
	case 0:
		return Result{Answer: Yes, Detail: fmt.Sprintf("hook %s exited 0", h.argv[0])}
	case 1:
		return Result{Answer: No, Detail: fmt.Sprintf("hook %s exited 1%s", h.argv[0], stderr.tail())}
	case -1:
		return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s did not run to an exit: %v%s", h.argv[0], err, stderr.tail())}
	}
	return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s exited %d (0 is allow, 1 deny)%s", h.argv[0], code, stderr.tail())}
}

func (h hookCheck) parse(out []byte, code int, stdout, stderr *capped) Result {
	var o HookOutput
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if stdout.over || dec.Decode(&o) != nil {
		return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s wrote something other than {\"answer\": ..., \"reason\": ...} on stdout (exit status %d)%s", h.argv[0], code, stderr.tail())}
	}
	reason := ""
	if o.Reason != "" {
		reason = ": " + o.Reason
	}
	switch o.Answer {
	case "allow":
		return Result{Answer: Yes, Detail: fmt.Sprintf("hook %s answered allow%s", h.argv[0], reason)}
	case "deny":
		return Result{Answer: No, Detail: fmt.Sprintf("hook %s answered deny%s", h.argv[0], reason)}
	case "unknown":
		return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s answered unknown%s", h.argv[0], reason)}
	}
	return Result{Answer: Unknown, Detail: fmt.Sprintf("hook %s answered %q, not allow, deny or unknown", h.argv[0], o.Answer)}
}

// hookInput is f as a hook reads it.
func hookInput(ctx context.Context, f *Facts) HookInput {
	in := HookInput{Version: HookVersion, Route: f.Route, Identifiers: f.Identifiers, Profile: f.Profile,
		Client: HookClient{Peer: f.Client.Peer.String(), Forwarded: f.Client.Forwarded}}
	if f.Client.Addr.IsValid() {
		in.Client.Address = f.Client.Addr.String()
	}
	if a := f.Account; a != nil {
		in.Account = &HookAccount{ID: a.ID}
		if a.EAB != nil {
			if k, err := a.EAB(ctx); err == nil && k != nil {
				in.Account.EABKeyID, in.Account.EABLabel = k.KeyID, k.Label
			}
		}
	}
	return in
}

// capped keeps the first maxHookOutput bytes written to it.
type capped struct {
	b    bytes.Buffer
	over bool
}

func (c *capped) Write(p []byte) (int, error) {
	if room := maxHookOutput - c.b.Len(); room < len(p) {
		c.over = true
		c.b.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return c.b.Write(p)
}

// tail is the end of what the hook wrote on stderr, for the detail.
func (c *capped) tail() string {
	s := strings.TrimSpace(c.b.String())
	if s == "" {
		return ""
	}
	if len(s) > 400 {
		s = "…" + s[len(s)-400:]
	}
	return "; stderr: " + s
}
