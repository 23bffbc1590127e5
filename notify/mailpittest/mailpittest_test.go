package mailpittest_test

import (
	"fmt"
	"net"
	"net/smtp"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"yosan/notify/mailpittest"
)

func TestStart(t *testing.T) {
	mp := mailpittest.Start(t)
	if got := mp.Messages(t); len(got) != 0 {
		t.Fatalf("a new mailpit holds %d messages", len(got))
	}
	addr := net.JoinHostPort(mp.SMTPHost, strconv.Itoa(mp.SMTPPort))
	for i, to := range []string{"a@example.com", "b@example.com"} {
		msg := fmt.Sprintf("From: sender@example.com\r\nTo: %s\r\nSubject: hello %d\r\nMessage-ID: <m%d@test>\r\nX-Test: yes\r\n\r\nbody %d\r\n", to, i, i, i)
		if err := smtp.SendMail(addr, nil, "sender@example.com", []string{to}, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mp.WaitFor(t, 2, 10*time.Second)
	if len(msgs) != 2 || msgs[0].Subject != "hello 1" || msgs[0].To[0].Address != "b@example.com" || msgs[0].MessageID != "m1@test" {
		t.Fatalf("messages = %+v", msgs)
	}
	got := mp.Search(t, `to:"a@example.com"`)
	if len(got) != 1 || got[0].Subject != "hello 0" {
		t.Fatalf("search = %+v", got)
	}
	m := mp.Message(t, got[0].ID)
	if m.Subject != "hello 0" || strings.TrimSpace(m.Text) != "body 0" || m.From.Address != "sender@example.com" {
		t.Errorf("message = %+v", m)
	}
	if h := m.Headers["X-Test"]; len(h) != 1 || h[0] != "yes" {
		t.Errorf("X-Test header = %q", h)
	}
}

func TestStartIsolated(t *testing.T) {
	a, b := mailpittest.Start(t), mailpittest.Start(t)
	if a.SMTPPort == b.SMTPPort || a.APIURL == b.APIURL {
		t.Fatalf("two servers share ports: %+v %+v", a, b)
	}
	msg := "From: s@example.com\r\nTo: r@example.com\r\nSubject: only a\r\n\r\nx\r\n"
	if err := smtp.SendMail(net.JoinHostPort(a.SMTPHost, strconv.Itoa(a.SMTPPort)), nil, "s@example.com", []string{"r@example.com"}, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	a.WaitFor(t, 1, 10*time.Second)
	if got := b.Messages(t); len(got) != 0 {
		t.Fatalf("the other server got %d messages", len(got))
	}
}

// fatalTB records a fatal failure instead of failing the real test.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatal(args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprint(args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) Fatalf(format string, args ...any) { f.Fatal(fmt.Sprintf(format, args...)) }

// startFailure runs Start with a recording TB and returns its fatal message ("" if it did not
// fail).
func startFailure(t *testing.T) string {
	f := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		mailpittest.Start(f)
	}()
	<-done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

func TestStartWithoutBinary(t *testing.T) {
	t.Run("ErrNotFound", func(t *testing.T) {
		t.Setenv("YOSAN_MAILPIT", "")
		t.Setenv("PATH", t.TempDir())
		t.Chdir(t.TempDir()) // outside the repository: no .data/bin/mailpit
		if msg := startFailure(t); !strings.Contains(msg, "mailpit not found") || !strings.Contains(msg, "YOSAN_MAILPIT") {
			t.Fatalf("failure = %q, want the not-found message", msg)
		}
	})
	t.Run("ErrBadEnvPath", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "no-mailpit")
		t.Setenv("YOSAN_MAILPIT", missing)
		if msg := startFailure(t); !strings.Contains(msg, missing) {
			t.Fatalf("failure = %q, want it to name %s", msg, missing)
		}
	})
}
