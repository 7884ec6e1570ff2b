package notifysend

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strings"
	"time"

	"github.com/hallmark-ca/hallmark/jobs/notify"
)

// email sends the event over SMTP, always after STARTTLS (net/smtp: the
// standard library's client does STARTTLS, AUTH PLAIN and the envelope,
// which is all a notification needs). A 5xx reply is a refusal; anything
// else that fails is retried.
type email struct {
	d         notify.Destination
	templates *notify.Templates
	tls       *tls.Config
	password  string
}

func newEmail(d notify.Destination, key string, tp *notify.Templates) (*email, error) {
	host, _, err := net.SplitHostPort(d.SMTP)
	if err != nil {
		return nil, fmt.Errorf("%s.smtp: %w", key, err)
	}
	e := &email{d: d, templates: tp, tls: &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}}
	if d.CAFile != "" {
		pemBytes, err := os.ReadFile(d.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s.ca_file: %w", key, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemBytes) {
			return nil, fmt.Errorf("%s.ca_file: %s holds no PEM certificate", key, d.CAFile)
		}
		e.tls.RootCAs = pool
	}
	if d.PasswordFile != "" {
		b, err := os.ReadFile(d.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("%s.password_file: %w", key, err)
		}
		e.password = strings.TrimRight(string(b), "\r\n")
	}
	return e, nil
}

func (e *email) send(ctx context.Context, m notify.Message) error {
	subject, err := e.templates.Subject(m)
	if err != nil {
		return &permanent{err: err}
	}
	msg := e.message(m, subject)
	deadline := time.Now().Add(time.Duration(e.d.TimeoutMS) * time.Millisecond)
	var d net.Dialer
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", e.d.SMTP)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadline)
	return smtpError(e.deliver(conn, msg))
}

func (e *email) deliver(conn net.Conn, msg []byte) error {
	c, err := smtp.NewClient(conn, e.tls.ServerName)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("hallmark"); err != nil {
		return err
	}
	if ok, _ := c.Extension("STARTTLS"); !ok {
		return errors.New("the SMTP server does not offer STARTTLS; mail is never sent in the clear")
	}
	if err := c.StartTLS(e.tls.Clone()); err != nil {
		return fmt.Errorf("STARTTLS: %w", err)
	}
	if e.d.Username != "" {
		if err := c.Auth(smtp.PlainAuth("", e.d.Username, e.password, e.tls.ServerName)); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	from, _ := mail.ParseAddress(e.d.From)
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	for _, to := range e.d.To {
		a, _ := mail.ParseAddress(to)
		if err := c.Rcpt(a.Address); err != nil {
			return err
		}
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// message is the RFC 5322 message: its Message-ID is the same for every
// attempt of one event to one destination, so a mail system that sees a
// retry after all can tell it is one message.
func (e *email) message(m notify.Message, subject string) []byte {
	sum := sha256.Sum256([]byte(m.Key + "/" + m.Destination))
	from, _ := mail.ParseAddress(e.d.From)
	_, domain, _ := strings.Cut(from.Address, "@")
	var b strings.Builder
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\n", e.d.From, strings.Join(e.d.To, ", "))
	fmt.Fprintf(&b, "Subject: %s\r\n", mime.QEncoding.Encode("utf-8", subject))
	fmt.Fprintf(&b, "Date: %s\r\nMessage-ID: <%s@%s>\r\n", m.At.Format(time.RFC1123Z), hex.EncodeToString(sum[:16]), domain)
	fmt.Fprintf(&b, "X-Hallmark-Event: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\n", m.Event)
	body := strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n")
	b.WriteString(body)
	if !strings.HasSuffix(body, "\r\n") {
		b.WriteString("\r\n")
	}
	return []byte(b.String())
}

// smtpError makes a 5xx reply a refusal; a 4xx reply or a broken
// connection stays retryable.
func smtpError(err error) error {
	var te *textproto.Error
	if errors.As(err, &te) && te.Code >= 500 {
		return &permanent{err: err}
	}
	return err
}
