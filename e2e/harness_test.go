package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"yosan/providers/openaifake"
)

// binary is the yosan binary built once for the package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "yosan-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "yosan")
	args := []string{"build", "-o", binary}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "../cmd/yosan")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build yosan:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const adminToken = "e2e-admin-token"

// gateway is one running yosan process.
type gateway struct {
	URL   string
	cmd   *exec.Cmd
	out   *syncBuffer
	exit  chan struct{}
	DBURL string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGateway runs the binary on dbURL with the given config file contents and extra
// environment, waits until it listens, and stops it when the test ends.
func startGateway(tb testing.TB, dbURL, config string, env ...string) *gateway {
	tb.Helper()
	cfgPath := filepath.Join(tb.TempDir(), "yosan.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL, "YOSAN_ADDR=127.0.0.1:0", "YOSAN_ADMIN_TOKEN="+adminToken,
		"YOSAN_CONFIG="+cfgPath)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	g := &gateway{cmd: cmd, out: &syncBuffer{}, exit: make(chan struct{}), DBURL: dbURL}
	cmd.Stderr = g.out
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() {
		cmd.Wait() //nolint:errcheck // the exit is observed through g.exit
		close(g.exit)
	}()
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(g.out, line)
			if i := strings.Index(line, "listening on "); i >= 0 {
				urlc <- strings.TrimSpace(line[i+len("listening on "):])
			}
		}
	}()
	tb.Cleanup(func() {
		g.stop()
		if tb.Failed() {
			tb.Logf("gateway output:\n%s", g.out.String())
		}
	})
	select {
	case g.URL = <-urlc:
	case <-g.exit:
		tb.Fatalf("gateway exited at start:\n%s", g.out.String())
	case <-time.After(60 * time.Second):
		tb.Fatalf("gateway did not start:\n%s", g.out.String())
	}
	return g
}

func (g *gateway) stop() {
	select {
	case <-g.exit:
		return
	default:
	}
	g.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
	select {
	case <-g.exit:
	case <-time.After(15 * time.Second):
		g.cmd.Process.Kill() //nolint:errcheck
		<-g.exit
	}
}

// fakeUpstream serves an openaifake.Fake that a test may swap while the gateway runs.
type fakeUpstream struct {
	*httptest.Server
	cur atomic.Pointer[openaifake.Fake]
}

func newFakeUpstream(tb testing.TB, opts openaifake.Options) *fakeUpstream {
	tb.Helper()
	fu := &fakeUpstream{}
	fu.cur.Store(openaifake.New(opts))
	fu.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fu.cur.Load().ServeHTTP(w, r)
	}))
	tb.Cleanup(func() {
		fu.cur.Load().Close()
		fu.Server.CloseClientConnections()
		fu.Server.Close()
	})
	return fu
}

func (fu *fakeUpstream) fake() *openaifake.Fake { return fu.cur.Load() }

// swap replaces the fake (to change its usage) and returns the new one.
func (fu *fakeUpstream) swap(opts openaifake.Options) *openaifake.Fake {
	f := openaifake.New(opts)
	old := fu.cur.Swap(f)
	old.Close()
	return f
}

// fakeConfig names the fake upstream as an OpenAI-compatible provider with three models.
func fakeConfig(upstreamURL string) string {
	return `providers:
  - name: fake
    type: openai-compatible
    base_url: ` + upstreamURL + `/v1
models:
  - name: gpt-4o-mini
    provider: fake
    tier: free
    max_output_tokens: 1000
    price: {input: "0.15", output: "0.60"}
  - name: big
    provider: fake
    upstream_model: gpt-4o
    tier: enterprise
    max_output_tokens: 4000
    price: {input: "2.50", output: "10.00", cached_input: "1.25"}
  - name: text-embedding-3-small
    provider: fake
    kind: embedding
    tier: free
    price: {input: "0.02"}
`
}

// call sends a JSON request and decodes a JSON answer.
func call(tb testing.TB, method, url, token string, body any) (int, http.Header, map[string]any) {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			tb.Fatalf("%s %s: answer is not JSON (%d): %s", method, url, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header, out
}

// mustAdmin calls the admin API and fails unless the status is want.
func (g *gateway) mustAdmin(tb testing.TB, method, path string, body any, want int) map[string]any {
	tb.Helper()
	status, _, out := call(tb, method, g.URL+"/admin/v1"+path, adminToken, body)
	if status != want {
		tb.Fatalf("%s %s: status %d, want %d: %v", method, path, status, want, out)
	}
	return out
}

// tenant is an org with one team and one key, made through the admin API.
type tenant struct {
	Org, Team, KeyID, Key string
}

func (g *gateway) newTenant(tb testing.TB, plan string) tenant {
	tb.Helper()
	org := g.mustAdmin(tb, "POST", "/orgs", map[string]any{"name": "acme"}, 201)["id"].(string)
	team := g.mustAdmin(tb, "POST", "/orgs/"+org+"/teams", map[string]any{"name": "research"}, 201)["id"].(string)
	k := g.mustAdmin(tb, "POST", "/orgs/"+org+"/keys", map[string]any{"name": "ci", "team_id": team, "plan": plan}, 201)
	return tenant{Org: org, Team: team, KeyID: k["id"].(string), Key: k["key"].(string)}
}

func (g *gateway) chat(tb testing.TB, key string, body any) (int, http.Header, map[string]any) {
	tb.Helper()
	return call(tb, "POST", g.URL+"/v1/chat/completions", key, body)
}

func chatBody(model string, maxTokens int) map[string]any {
	return map[string]any{"model": model, "max_tokens": maxTokens,
		"messages": []map[string]any{{"role": "user", "content": "Say hello to the budget."}}}
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}
