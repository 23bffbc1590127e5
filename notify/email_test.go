package notify_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"yosan/notify"
	"yosan/notify/mailpittest"
)

// mailWait is how long a test waits for mail to arrive in mailpit: a deadline, not a speed
// requirement.
const mailWait = 10 * time.Second

func TestSMTPConfigValidate(t *testing.T) {
	ok := notify.SMTPConfig{Host: "smtp.example.com", Port: 587, From: "Yosan <alerts@example.com>"}
	with := func(f func(*notify.SMTPConfig)) notify.SMTPConfig {
		c := ok
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name    string
		cfg     notify.SMTPConfig
		wantErr string
	}{
		{"OK", ok, ""},
		{"OKBareAddress", with(func(c *notify.SMTPConfig) { c.From = "alerts@example.com" }), ""},
		{"OKEveryMode", with(func(c *notify.SMTPConfig) { c.TLS = notify.TLSImplicit; c.Port = 465 }), ""},
		{"OKNoneOnLocalhostWithUser", with(func(c *notify.SMTPConfig) { c.Host, c.TLS, c.Username = "localhost", notify.TLSNone, "u" }), ""},
		{"ErrNoHost", with(func(c *notify.SMTPConfig) { c.Host = "" }), "host is required"},
		{"ErrHostWithSpace", with(func(c *notify.SMTPConfig) { c.Host = "smtp example.com" }), "not a host name"},
		{"ErrPortZero", with(func(c *notify.SMTPConfig) { c.Port = 0 }), "port 0 is out of range"},
		{"ErrPortTooBig", with(func(c *notify.SMTPConfig) { c.Port = 65536 }), "port 65536 is out of range"},
		{"ErrNoFrom", with(func(c *notify.SMTPConfig) { c.From = "" }), "from is required"},
		{"ErrBadFrom", with(func(c *notify.SMTPConfig) { c.From = "Yosan alerts" }), "not an email address"},
		{"ErrTwoFroms", with(func(c *notify.SMTPConfig) { c.From = "a@example.com, b@example.com" }), "not an email address"},
		{"ErrTLSMode", with(func(c *notify.SMTPConfig) { c.TLS = "ssl" }), `TLS "ssl" is unknown`},
		{"ErrPasswordInClear", with(func(c *notify.SMTPConfig) { c.TLS, c.Username = notify.TLSNone, "u" }), "in clear"},
		{"ErrNegativeTimeout", with(func(c *notify.SMTPConfig) { c.Timeout = -time.Second }), "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// mailerFor returns a Mailer to mailpit s with a fixed clock.
func mailerFor(s *mailpittest.Server, f func(*notify.SMTPConfig)) *notify.Mailer {
	cfg := notify.SMTPConfig{Host: s.SMTPHost, Port: s.SMTPPort, From: "Yosan アラート <alerts@yosan.example>", TLS: notify.TLSNone}
	if f != nil {
		f(&cfg)
	}
	m := notify.NewMailer(cfg)
	m.Now = func() time.Time { return time.Date(2026, 11, 5, 9, 30, 0, 0, time.FixedZone("JST", 9*3600)) }
	return m
}

func TestMailerSend(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		mp := mailpittest.Start(t)
		subject, text := notify.RenderEmail(thresholdEvent(), "https://yosan.example.com")
		// A long body, to cross the 76-character base64 lines many times.
		text += strings.Repeat("長い本文の行です。 long body line.\n", 40)
		err := mailerFor(mp, nil).Send(context.Background(), "dlv_123", []string{"Ops Team <ops@acme.example>", "cfo@acme.example"}, subject, text)
		if err != nil {
			t.Fatal(err)
		}
		msgs := mp.WaitFor(t, 1, mailWait)
		m := mp.Message(t, msgs[0].ID)
		if m.From.Address != "alerts@yosan.example" || m.From.Name != "Yosan アラート" {
			t.Errorf("From = %+v", m.From)
		}
		if len(m.To) != 2 || m.To[0].Address != "ops@acme.example" || m.To[0].Name != "Ops Team" || m.To[1].Address != "cfo@acme.example" {
			t.Errorf("To = %+v", m.To)
		}
		if m.Subject != subject {
			t.Errorf("Subject = %q, want %q", m.Subject, subject)
		}
		if m.MessageID != "dlv_123@yosan" {
			t.Errorf("MessageID = %q, want dlv_123@yosan", m.MessageID)
		}
		if got := strings.ReplaceAll(m.Text, "\r\n", "\n"); !strings.Contains(got, text) {
			t.Errorf("Text differs from what was sent:\n%s", m.Text)
		}
		assertInOrder(t, m.Text, "予算アラート", "¥812,500", "81.3%", "budget alert", "¥812,500", "81.3%")
		for name, want := range map[string]string{
			"Message-Id":                "<dlv_123@yosan>",
			"Date":                      "Thu, 05 Nov 2026 09:30:00 +0900",
			"Mime-Version":              "1.0",
			"Content-Type":              "text/plain; charset=UTF-8",
			"Content-Transfer-Encoding": "base64",
			"Auto-Submitted":            "auto-generated",
		} {
			if got := m.Headers[name]; len(got) != 1 || got[0] != want {
				t.Errorf("header %s = %q, want %q", name, got, want)
			}
		}
		if raw := m.Headers["Subject"]; len(raw) != 1 || !strings.HasPrefix(raw[0], "=?UTF-8?b?") {
			t.Errorf("raw Subject = %q, want RFC 2047 B-encoded words", raw)
		}
		if msgs[0].Username != "" {
			t.Errorf("sent as %q without a username configured", msgs[0].Username)
		}
	})

	t.Run("OKAuth", func(t *testing.T) {
		mp := mailpittest.Start(t)
		m := mailerFor(mp, func(c *notify.SMTPConfig) { c.TLS, c.Username, c.Password = notify.TLSAuto, "yosan", "secret" })
		if err := m.Send(context.Background(), "dlv_auth", []string{"ops@acme.example"}, "auth", "hello"); err != nil {
			t.Fatal(err)
		}
		if got := mp.WaitFor(t, 1, mailWait)[0].Username; got != "yosan" {
			t.Errorf("authenticated as %q, want yosan", got)
		}
	})

	t.Run("OKSameMessageIDOnRetry", func(t *testing.T) {
		mp := mailpittest.Start(t)
		m := mailerFor(mp, nil)
		for range 2 {
			if err := m.Send(context.Background(), "dlv_retry", []string{"ops@acme.example"}, "retry", "hello"); err != nil {
				t.Fatal(err)
			}
		}
		for _, msg := range mp.WaitFor(t, 2, mailWait) {
			if msg.MessageID != "dlv_retry@yosan" {
				t.Errorf("MessageID = %q, want dlv_retry@yosan", msg.MessageID)
			}
		}
		if got := mp.Search(t, `to:"ops@acme.example" subject:retry`); len(got) != 2 {
			t.Errorf("search found %d messages, want 2", len(got))
		}
	})

	t.Run("ErrPermanentRejection", func(t *testing.T) {
		mp := mailpittest.Start(t, "--smtp-allowed-recipients", `@acme\.example$`)
		err := mailerFor(mp, nil).Send(context.Background(), "dlv_rej", []string{"ops@acme.example", "someone@elsewhere.example"}, "x", "y")
		if err == nil || !notify.Permanent(err) || !strings.Contains(err.Error(), "someone@elsewhere.example") {
			t.Fatalf("Send = %v, want a permanent error naming the rejected recipient", err)
		}
		if got := mp.Messages(t); len(got) != 0 {
			t.Errorf("mailpit stored %d messages after a rejected recipient", len(got))
		}
	})

	t.Run("ErrPasswordWithoutTLS", func(t *testing.T) {
		// The same mailpit, reached under a name that is not localhost: it offers AUTH but no
		// STARTTLS, so the password would cross the network in clear.
		mp := mailpittest.Start(t)
		m := mailerFor(mp, func(c *notify.SMTPConfig) {
			c.Host, c.TLS, c.Username, c.Password = "::ffff:127.0.0.1", notify.TLSAuto, "yosan", "secret"
		})
		err := m.Send(context.Background(), "dlv_clear", []string{"ops@acme.example"}, "x", "y")
		if err == nil || !strings.Contains(err.Error(), "without TLS") {
			t.Fatalf("Send = %v, want a refusal to send the password in clear", err)
		}
	})

	t.Run("ErrStartTLSRequired", func(t *testing.T) {
		mp := mailpittest.Start(t)
		err := mailerFor(mp, func(c *notify.SMTPConfig) { c.TLS = notify.TLSStartTLS }).Send(context.Background(), "dlv_tls", []string{"ops@acme.example"}, "x", "y")
		if err == nil || !strings.Contains(err.Error(), "does not offer STARTTLS") {
			t.Fatalf("Send = %v, want an error about the missing STARTTLS", err)
		}
	})

	t.Run("ErrConnectionRefused", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		m := notify.NewMailer(notify.SMTPConfig{Host: "127.0.0.1", Port: port, From: "alerts@yosan.example", TLS: notify.TLSNone})
		err = m.Send(context.Background(), "dlv_1", []string{"ops@acme.example"}, "x", "y")
		if !errors.Is(err, syscall.ECONNREFUSED) || notify.Permanent(err) {
			t.Fatalf("Send = %v, want connection refused (not permanent)", err)
		}
	})

	t.Run("ErrContextTimeout", func(t *testing.T) {
		m := notify.NewMailer(notify.SMTPConfig{Host: "127.0.0.1", Port: silentServer(t), From: "alerts@yosan.example", TLS: notify.TLSNone})
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := m.Send(ctx, "dlv_1", []string{"ops@acme.example"}, "x", "y")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send = %v, want context.DeadlineExceeded", err)
		}
	})

	t.Run("ErrSessionTimeout", func(t *testing.T) {
		m := notify.NewMailer(notify.SMTPConfig{Host: "127.0.0.1", Port: silentServer(t), From: "alerts@yosan.example", TLS: notify.TLSNone, Timeout: 100 * time.Millisecond})
		err := m.Send(context.Background(), "dlv_1", []string{"ops@acme.example"}, "x", "y")
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send = %v, want a network timeout", err)
		}
	})

	// Bad input is refused before any connection: the port is closed on purpose.
	bad := notify.NewMailer(notify.SMTPConfig{Host: "127.0.0.1", Port: 1, From: "alerts@yosan.example", TLS: notify.TLSNone})
	for _, tc := range []struct {
		name, msgID string
		to          []string
		subject     string
		wantErr     string
	}{
		{"ErrNoRecipient", "dlv_1", nil, "x", "no recipient"},
		{"ErrBadRecipient", "dlv_1", []string{"not an address"}, "x", "not an email address"},
		{"ErrRecipientLineBreak", "dlv_1", []string{"a@example.com\r\nBcc: b@example.com"}, "x", "line break"},
		{"ErrSubjectLineBreak", "dlv_1", []string{"a@example.com"}, "x\r\nBcc: b@example.com", "subject contains a line break"},
		{"ErrEmptyMessageID", "", []string{"a@example.com"}, "x", "message id"},
		{"ErrMessageIDWithAt", "a@b", []string{"a@example.com"}, "x", "message id"},
		{"ErrMessageIDLineBreak", "a\r\nb", []string{"a@example.com"}, "x", "message id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := bad.Send(context.Background(), tc.msgID, tc.to, tc.subject, "text")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Send = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	t.Run("ErrBadConfig", func(t *testing.T) {
		err := notify.NewMailer(notify.SMTPConfig{Port: 25}).Send(context.Background(), "dlv_1", []string{"a@example.com"}, "x", "y")
		if err == nil || !strings.Contains(err.Error(), "host is required") {
			t.Fatalf("Send = %v, want a config error", err)
		}
	})
}

// silentServer returns the port of a TCP server that accepts connections and never says a
// word (no SMTP greeting).
func silentServer(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	tb.Cleanup(func() {
		l.Close()
		<-done
	})
	return l.Addr().(*net.TCPAddr).Port
}

// writeSelfSignedCert writes a certificate for 127.0.0.1 and localhost and its key as PEM
// files, returning their paths.
func writeSelfSignedCert(tb testing.TB) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "mailpit test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

func TestMailerSendTLS(t *testing.T) {
	cert, key := writeSelfSignedCert(t)
	send := func(t *testing.T, mp *mailpittest.Server, f func(*notify.SMTPConfig)) error {
		t.Helper()
		return mailerFor(mp, f).Send(context.Background(), "dlv_tls", []string{"ops@acme.example"}, "TLS テスト", "本文 body")
	}
	for _, tc := range []struct {
		name string
		args []string
		mode string
	}{
		// Requiring TLS, mailpit refuses insecure AUTH, which Start allows by default.
		{"OKStartTLS", []string{"--smtp-require-starttls", "--smtp-auth-allow-insecure=false"}, notify.TLSStartTLS},
		{"OKAutoUpgrades", []string{"--smtp-require-starttls", "--smtp-auth-allow-insecure=false"}, notify.TLSAuto},
		{"OKImplicitTLS", []string{"--smtp-require-tls", "--smtp-auth-allow-insecure=false"}, notify.TLSImplicit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp := mailpittest.Start(t, append([]string{"--smtp-tls-cert", cert, "--smtp-tls-key", key}, tc.args...)...)
			err := send(t, mp, func(c *notify.SMTPConfig) {
				c.TLS, c.InsecureSkipVerify, c.Username, c.Password = tc.mode, true, "yosan", "secret"
			})
			if err != nil {
				t.Fatal(err)
			}
			got := mp.WaitFor(t, 1, mailWait)[0]
			if got.Subject != "TLS テスト" || got.Username != "yosan" {
				t.Errorf("stored %+v", got)
			}
		})
	}

	t.Run("ErrUntrustedCertificate", func(t *testing.T) {
		mp := mailpittest.Start(t, "--smtp-tls-cert", cert, "--smtp-tls-key", key, "--smtp-require-starttls", "--smtp-auth-allow-insecure=false")
		err := send(t, mp, func(c *notify.SMTPConfig) { c.TLS = notify.TLSStartTLS })
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("Send = %v, want an unknown authority error", err)
		}
		if got := mp.Messages(t); len(got) != 0 {
			t.Errorf("mailpit stored %d messages over an untrusted connection", len(got))
		}
	})
}
