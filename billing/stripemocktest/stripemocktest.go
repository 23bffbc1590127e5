// Package stripemocktest runs a real stripe-mock (Stripe's own mock of its API: it validates each
// request against Stripe's OpenAPI spec and answers with canned objects) for tests, one private
// instance per call of Start, behind a recording reverse proxy.
//
// stripe-mock is stateless: it returns canned fixtures (a retrieved invoice is always a draft),
// and nothing is stored. So tests assert on the requests the code sent (Server.Requests:
// method, path, idempotency key, form fields), not on the objects that come back; a test that
// needs an object in a given state stubs that one answer (Server.Stub), and Server.SetDown
// plays a Stripe outage.
//
// The binary is $YOSAN_STRIPE_MOCK, else <repo>/.data/bin/stripe-mock, else stripe-mock on
// PATH; `make test` installs the pinned version with scripts/test-peer.sh stripe-mock and sets
// YOSAN_STRIPE_MOCK. Without one, Start fails the test: it never skips.
package stripemocktest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// startTimeout bounds how long Start waits for stripe-mock to answer (it takes a fraction of a
// second to load its spec; this only turns a hang into a failure that says what it printed).
const startTimeout = 30 * time.Second

// Key is a secret key stripe-mock accepts ("sk_test_" and one more part, no further
// underscores). Any such key works; this one is here so tests need not invent one.
const Key = "sk_test_yosan"

// Request is one request the proxy received, recorded before it was answered.
type Request struct {
	Method string
	// Path is the URL path, e.g. "/v1/invoiceitems".
	Path string
	// Query is the raw query string (stripe-go sends a GET's parameters there).
	Query string
	// IdempotencyKey is the Idempotency-Key header ("" when absent).
	IdempotencyKey string
	// Form is the parsed form body, keyed as stripe-go encodes it ("metadata[yosan_org_id]",
	// "tax_id_data[0][type]").
	Form url.Values
	// Down reports that the proxy answered it with 503 itself (SetDown) instead of passing it on.
	Down bool
	// Stubbed reports that the proxy answered it with a Stub instead of passing it on.
	Stubbed bool
}

// String formats the request for failure messages: "POST /v1/customers key=yosan-cust-1".
func (r Request) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	if r.IdempotencyKey != "" {
		s += " key=" + r.IdempotencyKey
	}
	if r.Down {
		s += " (down)"
	}
	if r.Stubbed {
		s += " (stub)"
	}
	return s
}

// Server is one running stripe-mock and the recording proxy in front of it.
type Server struct {
	// URL is the proxy's base URL ("http://127.0.0.1:41234"): give it to the Stripe client as
	// its API URL.
	URL string

	out   *lockedBuffer
	mu    sync.Mutex
	reqs  []Request
	down  bool
	stubs map[string]stub
}

// stub is a canned answer the proxy gives itself.
type stub struct {
	status int
	body   string
}

// Start launches a stripe-mock listening on a private Unix socket (so parallel tests never
// race for ports, and its default HTTPS listener on :12112 stays off), waits until it answers,
// puts a recording proxy on a free 127.0.0.1 port in front of it, and stops both when the test
// ends. It fails the test when there is no stripe-mock binary or it does not start.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := binary(tb)

	// A Unix socket path must stay under ~104 bytes, so not tb.TempDir (it holds the test name).
	dir, err := os.MkdirTemp("", "stripe-mock-")
	if err != nil {
		tb.Fatalf("stripe-mock: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "http.sock")

	s := &Server{out: &lockedBuffer{}}
	cmd := exec.Command(bin, "-http-unix", sock)
	cmd.Stdout, cmd.Stderr = s.out, s.out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("run %s: %v", bin, err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait() //nolint:errcheck // an early exit is reported with stripe-mock's output
		close(done)
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited already
		<-done
	})

	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}
	tb.Cleanup(transport.CloseIdleConnections)
	deadline := time.Now().Add(startTimeout)
	for !ready(transport) {
		select {
		case <-done:
			tb.Fatalf("stripe-mock (%s) exited at start:\n%s", bin, s.out.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("stripe-mock (%s): no answer on %s after %s; output:\n%s", bin, sock, startTimeout, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "stripe-mock"})
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fmt.Fprintf(s.out, "stripemocktest proxy: %s %s: %v\n", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body)) // a bad body is stripe-mock's to reject
		s.mu.Lock()
		down := s.down
		st, stubbed := s.stubs[r.Method+" "+r.URL.Path]
		stubbed = stubbed && !down
		s.reqs = append(s.reqs, Request{
			Method:         r.Method,
			Path:           r.URL.Path,
			Query:          r.URL.RawQuery,
			IdempotencyKey: r.Header.Get("Idempotency-Key"),
			Form:           form,
			Down:           down,
			Stubbed:        stubbed,
		})
		s.mu.Unlock()
		switch {
		case down:
			writeDown(w)
		case stubbed:
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Request-Id", "req_stub")
			w.WriteHeader(st.status)
			io.WriteString(w, st.body) //nolint:errcheck // the client may be gone
		default:
			proxy.ServeHTTP(w, r)
		}
	}))
	tb.Cleanup(front.Close)
	s.URL = front.URL
	return s
}

// writeDown answers as Stripe does during an outage: 503 with an api_error body. It says
// Stripe-Should-Retry: true, so a client configured to retry would retry, and Requests shows
// how many attempts a client made.
func writeDown(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Stripe-Should-Retry", "true")
	w.WriteHeader(http.StatusServiceUnavailable)
	io.WriteString(w, `{"error":{"type":"api_error","message":"stripemocktest: Stripe is down (SetDown)"}}`+"\n") //nolint:errcheck // the client may be gone
}

// ready reports whether stripe-mock answers HTTP on its socket (any status: without a key it
// says 401).
func ready(t *http.Transport) bool {
	client := http.Client{Transport: t, Timeout: time.Second}
	resp, err := client.Get("http://stripe-mock/v1/balance")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// Requests returns a copy of the requests received since Start or the last Reset, oldest
// first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Reset forgets the recorded requests and the stubs.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
	s.stubs = nil
}

// Stub makes the proxy answer every request for method and path (e.g. "GET",
// "/v1/invoices/in_1") itself, with status and the JSON body, until Reset. stripe-mock keeps no
// state and answers every retrieve with the same fixture (an invoice is always a draft), so a
// test that needs an object in another state stubs it:
//
//	s.Stub("GET", "/v1/invoices/in_1", 200, `{"id":"in_1","object":"invoice","status":"paid"}`)
//
// Requests answered this way are recorded with Stubbed set. SetDown takes precedence.
func (s *Server) Stub(method, path string, status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stubs == nil {
		s.stubs = make(map[string]stub)
	}
	s.stubs[method+" "+path] = stub{status: status, body: body}
}

// SetDown makes the proxy answer every request itself with 503 Service Unavailable and a Stripe
// api_error body (Stripe down), without passing it to stripe-mock; SetDown(false) restores it.
// A 503 rather than a dropped connection: Go's HTTP transport silently replays a request that
// carries an Idempotency-Key when a reused connection dies, so a dropped connection would make
// the attempt count depend on connection reuse; a 503 leaves retrying to the Stripe client
// alone, which is what a test of its retry setting wants to see. Requests answered this way are
// recorded with Down set.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Output returns what stripe-mock has printed so far (one line per request), for a failure
// message.
func (s *Server) Output() string { return s.out.String() }

// binary finds the stripe-mock executable or fails the test saying how to get one.
func binary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("YOSAN_STRIPE_MOCK"); p != "" {
		if _, err := os.Stat(p); err != nil {
			tb.Fatalf("YOSAN_STRIPE_MOCK=%s: %v", p, err)
		}
		return p
	}
	if root, ok := repoRoot(); ok {
		p := filepath.Join(root, ".data", "bin", "stripe-mock")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		return p
	}
	tb.Fatal("stripe-mock not found: run `make test` (it installs it with scripts/test-peer.sh stripe-mock) or set YOSAN_STRIPE_MOCK")
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

// lockedBuffer collects stripe-mock's output from its pipe goroutines and the test.
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
	return strings.TrimRight(l.b.String(), "\n")
}
