// Package mailpittest runs a real mailpit (an SMTP server that keeps what it receives and shows
// it over HTTP) for tests, one private instance per call of Start, on free local ports, with
// its own database that goes away with the test.
//
// The binary is $YOSAN_MAILPIT, else <repo>/.data/bin/mailpit, else mailpit on PATH; `make
// test` installs the pinned version with scripts/test-peer.sh mailpit and sets YOSAN_MAILPIT. Without
// one, Start fails the test: it never skips.
package mailpittest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long Start waits for mailpit to answer (it takes well under a second;
// this only turns a hang into a failure that says what mailpit printed).
const startTimeout = 30 * time.Second

// Server is one running mailpit.
type Server struct {
	// SMTPHost and SMTPPort are where mailpit accepts mail (127.0.0.1 and a free port).
	SMTPHost string
	SMTPPort int
	// APIURL is the base of the HTTP API and web UI, e.g. "http://127.0.0.1:41234".
	APIURL string

	out *lockedBuffer
}

// Address is a mailbox in mailpit's answers.
type Address struct {
	Name    string
	Address string
}

// Message is mailpit's summary of a stored message (GET /api/v1/messages).
type Message struct {
	// ID is mailpit's own id, for Message.
	ID string
	// MessageID is the Message-ID header without the angle brackets.
	MessageID string
	From      Address
	To        []Address
	Cc        []Address
	Subject   string
	Created   time.Time
	Snippet   string
	Size      int64
	// Username is the SMTP AUTH user the message was sent as, "" without AUTH.
	Username string
}

// MessageDetail is one message in full (GET /api/v1/message/{ID} and its /headers).
type MessageDetail struct {
	ID        string
	MessageID string
	From      Address
	To        []Address
	Cc        []Address
	Subject   string
	Date      time.Time
	Username  string
	// Text and HTML are the decoded bodies.
	Text string
	HTML string
	// Headers are the raw (undecoded) header values, keyed in canonical MIME form
	// ("Message-Id", "Content-Type").
	Headers map[string][]string
}

// Start launches a mailpit on free 127.0.0.1 ports that accepts any SMTP login (also without
// TLS), waits until both its SMTP and HTTP ports answer, and stops it when the test ends.
// extraArgs are appended to mailpit's command line and override those defaults (to require
// TLS, pass "--smtp-tls-cert", cert, "--smtp-tls-key", key, "--smtp-require-starttls" and
// "--smtp-auth-allow-insecure=false", which mailpit wants with it).
// It fails the test when there is no mailpit binary or it does not start.
func Start(tb testing.TB, extraArgs ...string) *Server {
	tb.Helper()
	bin := binary(tb)
	// A free port can be taken by someone else between our probe and mailpit's bind; try again
	// with new ports when mailpit exits at start.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, exited, err := start(tb, bin, extraArgs)
		if err == nil {
			return s
		}
		lastErr = err
		if !exited {
			break
		}
	}
	tb.Fatalf("start mailpit (%s): %v", bin, lastErr)
	return nil
}

// start runs mailpit once; exited reports that it quit on its own (e.g. a port was taken).
func start(tb testing.TB, bin string, extraArgs []string) (s *Server, exited bool, err error) {
	tb.Helper()
	smtpPort, err := freePort()
	if err != nil {
		return nil, false, err
	}
	httpPort, err := freePort()
	if err != nil {
		return nil, false, err
	}
	s = &Server{
		SMTPHost: "127.0.0.1",
		SMTPPort: smtpPort,
		APIURL:   "http://127.0.0.1:" + strconv.Itoa(httpPort),
		out:      &lockedBuffer{},
	}
	args := append([]string{
		"--smtp", "127.0.0.1:" + strconv.Itoa(smtpPort),
		"--listen", "127.0.0.1:" + strconv.Itoa(httpPort),
		"--database", filepath.Join(tb.TempDir(), "mailpit.db"),
		"--disable-version-check",
		"--smtp-disable-rdns",
	}, extraArgs...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "MP_SMTP_AUTH_ACCEPT_ANY=1", "MP_SMTP_AUTH_ALLOW_INSECURE=1")
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("run %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait() //nolint:errcheck // an early exit is reported with mailpit's output
		close(done)
	}()
	stop := func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-done
	}

	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			return nil, true, fmt.Errorf("mailpit exited at start: %s", s.out.String())
		default:
		}
		if s.ready() {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, false, fmt.Errorf("no answer on %s and 127.0.0.1:%d after %s; output:\n%s", s.APIURL, smtpPort, startTimeout, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Cleanup(stop)
	return s, false, nil
}

// ready reports whether the HTTP API and the SMTP port both answer.
func (s *Server) ready() bool {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(s.APIURL + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(s.SMTPHost, strconv.Itoa(s.SMTPPort)), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// freePort returns a port that was free a moment ago on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// binary finds the mailpit executable or fails the test saying how to get one.
func binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("YOSAN_MAILPIT"); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("YOSAN_MAILPIT=%s: %v", p, err)
		}
		return p
	}
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, ".data", "bin", "mailpit")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p
	}
	tb.Fatal("mailpit not found: run `make test` (it installs it with scripts/test-peer.sh mailpit) or set YOSAN_MAILPIT")
	return ""
}

// repoRoot walks up from the working directory to the folder holding go.mod.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Output returns what mailpit has printed so far, for a failure message.
func (s *Server) Output() string { return s.out.String() }

// Messages returns the summaries of all stored messages, newest first. It fails the test when
// the API does not answer.
func (s *Server) Messages(tb testing.TB) []Message {
	tb.Helper()
	var res struct{ Messages []Message }
	s.get(tb, "/api/v1/messages?limit=1000", &res)
	return res.Messages
}

// Search returns the summaries of the messages matching a mailpit search query (e.g.
// `to:"ops@example.com"`, `subject:"Budget alert"`, or plain words), newest first. It fails the
// test when the API does not answer.
func (s *Server) Search(tb testing.TB, query string) []Message {
	tb.Helper()
	var res struct{ Messages []Message }
	s.get(tb, "/api/v1/search?limit=1000&query="+url.QueryEscape(query), &res)
	return res.Messages
}

// Message returns one message in full, with its headers. It fails the test when the message
// does not exist or the API does not answer.
func (s *Server) Message(tb testing.TB, id string) MessageDetail {
	tb.Helper()
	var m MessageDetail
	s.get(tb, "/api/v1/message/"+url.PathEscape(id), &m)
	s.get(tb, "/api/v1/message/"+url.PathEscape(id)+"/headers", &m.Headers)
	return m
}

// WaitFor polls until at least n messages are stored and returns them, newest first. After
// timeout it fails the test, listing what it saw. The timeout is a deadline for the mail to
// arrive, not a measure of speed.
func (s *Server) WaitFor(tb testing.TB, n int, timeout time.Duration) []Message {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ms := s.Messages(tb)
		if len(ms) >= n {
			return ms
		}
		if time.Now().After(deadline) {
			var seen strings.Builder
			for _, m := range ms {
				fmt.Fprintf(&seen, "\n  %s from %s to %v: %q", m.Created.Format(time.RFC3339), m.From.Address, m.To, m.Subject)
			}
			tb.Fatalf("mailpit: want at least %d messages within %s, have %d:%s\nmailpit output:\n%s", n, timeout, len(ms), seen.String(), s.out.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// get decodes the JSON answer of GET path into v, failing the test on any error.
func (s *Server) get(tb testing.TB, path string, v any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.APIURL+path, nil)
	if err != nil {
		tb.Fatalf("mailpit: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("mailpit: GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("mailpit: GET %s: read: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("mailpit: GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		tb.Fatalf("mailpit: GET %s: decode: %v: %s", path, err, body)
	}
}

// lockedBuffer collects mailpit's output from its pipe goroutines and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
