package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"time"
)

// SMTP TLS modes (SMTPConfig.TLS).
const (
	// TLSAuto upgrades with STARTTLS when the server offers it, and sends in clear otherwise
	// (but never a password to a host other than localhost).
	TLSAuto = "auto"
	// TLSStartTLS requires STARTTLS (submission, port 587).
	TLSStartTLS = "starttls"
	// TLSImplicit speaks TLS from the first byte (SMTPS, port 465).
	TLSImplicit = "tls"
	// TLSNone never encrypts (a relay on localhost or a test server).
	TLSNone = "none"
)

// DefaultSMTPTimeout bounds one SMTP session, from dial to the end of DATA, when
// SMTPConfig.Timeout is zero.
const DefaultSMTPTimeout = 30 * time.Second

// SMTPConfig says how to reach the mail server alerts are sent through.
type SMTPConfig struct {
	Host string
	Port int
	// Username and Password are sent with AUTH PLAIN when Username is set and the server
	// offers AUTH; only over TLS, or to localhost.
	Username, Password string
	// From is the sender, e.g. `Yosan <alerts@example.com>`.
	From string
	// TLS is one of TLSAuto (the default when empty), TLSStartTLS, TLSImplicit, TLSNone.
	TLS string
	// Timeout bounds one session; zero means DefaultSMTPTimeout.
	Timeout time.Duration
	// InsecureSkipVerify accepts any server certificate (a test server with a self-signed
	// certificate). Never in production.
	InsecureSkipVerify bool
}

// Validate checks the config and returns an error naming the first bad field: a missing host,
// a port outside 1..65535, a From that is not an address, an unknown TLS mode, a negative
// timeout, or a username with TLS "none" to a host other than localhost (the password would
// cross the network in clear).
func (c SMTPConfig) Validate() error {
	if strings.TrimSpace(c.Host) == "" {
		return errors.New("smtp config: host is required")
	}
	if strings.ContainsAny(c.Host, " \t\r\n/") {
		return fmt.Errorf("smtp config: host %q is not a host name or address", c.Host)
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("smtp config: port %d is out of range: give 1 to 65535", c.Port)
	}
	if c.From == "" {
		return errors.New("smtp config: from is required (e.g. \"Yosan <alerts@example.com>\")")
	}
	if _, err := mail.ParseAddress(c.From); err != nil {
		return fmt.Errorf("smtp config: from %q is not an email address: %w", c.From, err)
	}
	switch c.TLS {
	case "", TLSAuto, TLSStartTLS, TLSImplicit:
	case TLSNone:
		if c.Username != "" && !isLocalhost(c.Host) {
			return fmt.Errorf("smtp config: TLS %q with a username would send the password to %s in clear: use %q or %q", TLSNone, c.Host, TLSStartTLS, TLSImplicit)
		}
	default:
		return fmt.Errorf("smtp config: TLS %q is unknown: use %q, %q, %q or %q", c.TLS, TLSAuto, TLSStartTLS, TLSImplicit, TLSNone)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("smtp config: timeout %s is negative", c.Timeout)
	}
	return nil
}

// isLocalhost matches net/smtp's rule for sending PLAIN credentials without TLS.
func isLocalhost(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// Permanent reports whether err carries a permanent SMTP rejection (a 5xx reply: unknown
// recipient, message refused, authentication failed), which retrying the same message will not
// fix. Transient (4xx) replies and network errors are not permanent.
func Permanent(err error) bool {
	var te *textproto.Error
	return errors.As(err, &te) && te.Code >= 500 && te.Code < 600
}

// Mailer sends plain text email through one SMTP server.
type Mailer struct {
	cfg SMTPConfig
	// Now dates the messages; nil means time.Now.
	Now func() time.Time
}

// NewMailer returns a Mailer for cfg. It does not connect; Send validates cfg.
func NewMailer(cfg SMTPConfig) *Mailer {
	return &Mailer{cfg: cfg, Now: time.Now}
}

// Send delivers one plain text message (UTF-8) to the recipients in one SMTP session. msgID
// becomes the Message-ID <msgID@yosan>, so a retry of the same delivery carries the same id and
// mail clients can thread or deduplicate it. The session ends at ctx's end or after the
// configured timeout, whichever comes first.
//
// It returns an error, wrapped with what it was doing, for a bad config, recipient, subject
// (no CR or LF) or msgID; for a failed connection, TLS handshake or STARTTLS that TLS
// "starttls" requires; for a server offering AUTH without PLAIN; and for any reply the server
// rejects (Permanent tells a 5xx rejection apart). When ctx ended, the error also wraps
// ctx.Err().
func (m *Mailer) Send(ctx context.Context, msgID string, to []string, subject, text string) error {
	if err := m.cfg.Validate(); err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	from, _ := mail.ParseAddress(m.cfg.From) // Validate parsed it
	rcpts, err := parseRecipients(to)
	if err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	now := time.Now
	if m.Now != nil {
		now = m.Now
	}
	msg, err := buildMessage(from, rcpts, subject, text, msgID, now())
	if err != nil {
		return fmt.Errorf("send mail: %w", err)
	}
	if err := m.session(ctx, from.Address, rcpts, msg); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("send mail: %w: %w", ctx.Err(), err)
		}
		return fmt.Errorf("send mail: %w", err)
	}
	return nil
}

// session runs one SMTP conversation that delivers msg.
func (m *Mailer) session(ctx context.Context, from string, rcpts []*mail.Address, msg []byte) error {
	cfg := m.cfg
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultSMTPTimeout
	}
	mode := cfg.TLS
	if mode == "" {
		mode = TLSAuto
	}
	addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", addr, err)
	}
	defer conn.Close()
	// One deadline for the whole session, and ctx's end cuts it short at once: a server that
	// accepts and then says nothing cannot hold a worker.
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("set smtp deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	tlsCfg := &tls.Config{ServerName: cfg.Host, InsecureSkipVerify: cfg.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	helo := heloName(conn.LocalAddr())
	if mode == TLSImplicit {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, cfg.Host)
	if err != nil {
		return fmt.Errorf("read smtp greeting from %s: %w", addr, err)
	}
	defer c.Close()
	if err := c.Hello(helo); err != nil {
		return fmt.Errorf("smtp hello: %w", err)
	}
	encrypted := mode == TLSImplicit
	if mode == TLSStartTLS || mode == TLSAuto {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(tlsCfg); err != nil {
				return fmt.Errorf("smtp starttls: %w", err)
			}
			encrypted = true
		} else if mode == TLSStartTLS {
			return fmt.Errorf("smtp starttls: %s does not offer STARTTLS, which TLS %q requires", addr, TLSStartTLS)
		}
	}
	if cfg.Username != "" {
		if ok, mechs := c.Extension("AUTH"); ok {
			if !encrypted && !isLocalhost(cfg.Host) {
				return fmt.Errorf("smtp auth: refusing to send the password to %s without TLS (the server did not offer STARTTLS)", addr)
			}
			if !hasWord(mechs, "PLAIN") {
				return fmt.Errorf("smtp auth: %s offers AUTH %s but not PLAIN", addr, mechs)
			}
			if err := c.Auth(smtp.PlainAuth("", cfg.Username, cfg.Password, cfg.Host)); err != nil {
				return fmt.Errorf("smtp auth as %s: %w", cfg.Username, err)
			}
		}
	}
	if err := c.Mail(from); err != nil {
		return fmt.Errorf("smtp mail from %s: %w", from, err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r.Address); err != nil {
			return fmt.Errorf("smtp rcpt to %s: %w", r.Address, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp data: %w", err)
	}
	// The server has taken the message: a failed QUIT must not make the caller send it twice.
	_ = c.Quit()
	return nil
}

// heloName is the name to greet with: the machine's host name when it is a fully qualified
// domain name, else the local address as an address literal (RFC 5321 section 4.1.3).
func heloName(local net.Addr) string {
	if h, err := os.Hostname(); err == nil && strings.Contains(h, ".") && validHostname(h) {
		return h
	}
	if ta, ok := local.(*net.TCPAddr); ok {
		if ip4 := ta.IP.To4(); ip4 != nil {
			return "[" + ip4.String() + "]"
		}
		return "[IPv6:" + ta.IP.String() + "]"
	}
	return "localhost"
}

func validHostname(h string) bool {
	if len(h) > 253 || strings.HasPrefix(h, ".") || strings.HasSuffix(h, ".") {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}

func hasWord(list, word string) bool {
	for _, f := range strings.Fields(list) {
		if strings.EqualFold(f, word) {
			return true
		}
	}
	return false
}

// parseRecipients checks each recipient is one address with no line break.
func parseRecipients(to []string) ([]*mail.Address, error) {
	if len(to) == 0 {
		return nil, errors.New("no recipient")
	}
	out := make([]*mail.Address, 0, len(to))
	for _, t := range to {
		if strings.ContainsAny(t, "\r\n") {
			return nil, fmt.Errorf("recipient %q contains a line break", t)
		}
		a, err := mail.ParseAddress(t)
		if err != nil {
			return nil, fmt.Errorf("recipient %q is not an email address: %w", t, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// validMsgID reports whether id can sit left of the @ in a Message-ID: printable ASCII
// without spaces or the characters that delimit one.
func validMsgID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>[]:;@\,"`, c) >= 0 {
			return false
		}
	}
	return true
}

// buildMessage assembles an RFC 5322 message: UTF-8 text/plain, base64 body, subject as
// RFC 2047 encoded words, CRLF line endings.
func buildMessage(from *mail.Address, to []*mail.Address, subject, text, msgID string, date time.Time) ([]byte, error) {
	if strings.ContainsAny(subject, "\r\n") {
		return nil, errors.New("build message: subject contains a line break")
	}
	if !validMsgID(msgID) {
		return nil, fmt.Errorf("build message: message id %q must be printable ASCII without spaces or <>@()[]:;\\,\"", msgID)
	}
	tos := make([]string, len(to))
	for i, a := range to {
		tos[i] = a.String()
	}
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from.String())
	header("To", strings.Join(tos, ",\r\n "))
	// Encoded words longer than 75 characters are split by a space; folding there keeps
	// header lines short and decodes to the same text.
	header("Subject", strings.ReplaceAll(mime.BEncoding.Encode("UTF-8", subject), "?= =?", "?=\r\n =?"))
	header("Date", date.Format(time.RFC1123Z))
	header("Message-ID", "<"+msgID+"@yosan>")
	// RFC 3834: an automatic message, so vacation responders stay quiet.
	header("Auto-Submitted", "auto-generated")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=UTF-8")
	header("Content-Transfer-Encoding", "base64")
	b.WriteString("\r\n")
	// Text is canonical (CRLF) before it is encoded (RFC 2045 section 6.8).
	canon := strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\n", "\r\n")
	enc := base64.StdEncoding.EncodeToString([]byte(canon))
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	if enc != "" {
		b.WriteString(enc + "\r\n")
	}
	return b.Bytes(), nil
}
