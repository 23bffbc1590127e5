package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

// streamRequest opens a streamed chat completion and returns the response for reading.
func streamRequest(tb testing.TB, ctx context.Context, g *gateway, key string, maxTokens int) *http.Response {
	tb.Helper()
	body := `{"model":"gpt-4o-mini","stream":true,"max_tokens":` + strconv.Itoa(maxTokens) + `,"messages":[{"role":"user","content":"Tell me a long story."}]}`
	req, err := http.NewRequestWithContext(ctx, "POST", g.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("stream answered %d: %s", resp.StatusCode, b)
	}
	return resp
}

// readEvents reads up to n SSE data events.
func readEvents(r *bufio.Reader, n int) []string {
	var out []string
	for len(out) < n {
		line, err := r.ReadString('\n')
		if strings.HasPrefix(line, "data: ") {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(line, "data: ")))
		}
		if err != nil {
			break
		}
	}
	return out
}

// waitSettled polls the ledger until the org has no pending reservation and returns the
// newest row.
func waitSettled(tb testing.TB, g *gateway, org string) map[string]any {
	tb.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		pending := g.mustAdmin(tb, "GET", "/orgs/"+org+"/reservations?status=pending", nil, 200)["data"].([]any)
		if len(pending) == 0 {
			rs := g.mustAdmin(tb, "GET", "/orgs/"+org+"/reservations?limit=1", nil, 200)["data"].([]any)
			if len(rs) == 1 {
				return rs[0].(map[string]any)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatal("the reservation was never settled")
	return nil
}

func TestStreamFailures(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{PromptTokens: 20, CompletionTokens: 60, ChunkDelay: 30 * time.Millisecond})
	g := startGateway(t, dbtest.NewURL(t), fakeConfig(fu.URL)+"request_timeout: 3s\n")

	t.Run("ClientDisconnect", func(t *testing.T) {
		tn := g.newTenant(t, "free")
		ctx, cancel := context.WithCancel(context.Background())
		resp := streamRequest(t, ctx, g, tn.Key, 500)
		got := readEvents(bufio.NewReader(resp.Body), 4)
		cancel()
		resp.Body.Close()
		if len(got) != 4 {
			t.Fatalf("read %d events before disconnecting", len(got))
		}
		r := waitSettled(t, g, tn.Org)
		out := r["output_tokens"].(float64)
		if r["status"] != "committed" || r["usage_source"] != "relayed" || out < 1 || out >= 60 || r["actual"] == "0" {
			t.Fatalf("settled as %v, want committed on the relayed tokens (not zero, not the full answer)", r)
		}
	})
	t.Run("UpstreamBreaks", func(t *testing.T) {
		tn := g.newTenant(t, "free")
		fu.fake().Enqueue(openaifake.Response{Kind: openaifake.BreakStream, After: 5})
		resp := streamRequest(t, context.Background(), g, tn.Key, 500)
		defer resp.Body.Close()
		events := readEvents(bufio.NewReader(resp.Body), 100)
		last := events[len(events)-1]
		if !strings.Contains(last, `"code":"upstream_stream_broken"`) {
			t.Fatalf("last event %s, want an error event", last)
		}
		for _, e := range events {
			if e == "[DONE]" {
				t.Fatal("a broken stream must not end with [DONE]")
			}
		}
		r := waitSettled(t, g, tn.Org)
		if r["status"] != "committed" || r["usage_source"] != "relayed" || r["output_tokens"].(float64) < 1 {
			t.Fatalf("settled as %v, want committed on the relayed tokens", r)
		}
	})
	t.Run("UpstreamHangsPastTimeout", func(t *testing.T) {
		tn := g.newTenant(t, "free")
		fu.fake().Enqueue(openaifake.Response{Kind: openaifake.Hang, After: 3})
		resp := streamRequest(t, context.Background(), g, tn.Key, 500)
		defer resp.Body.Close()
		events := readEvents(bufio.NewReader(resp.Body), 100)
		if last := events[len(events)-1]; !strings.Contains(last, "did not finish in time") {
			t.Fatalf("last event %s, want a timeout error event", last)
		}
		if r := waitSettled(t, g, tn.Org); r["status"] != "committed" || r["usage_source"] != "relayed" {
			t.Fatalf("settled as %v", r)
		}
	})
	t.Run("UpstreamErrorBeforeFirstByte", func(t *testing.T) {
		tn := g.newTenant(t, "free")
		// A failing backend is retried once: two 500s before the first byte are a 502.
		fu.fake().Enqueue(openaifake.ServerError(), openaifake.ServerError())
		status, _, out := g.chat(t, tn.Key, map[string]any{"model": "gpt-4o-mini", "stream": true,
			"messages": []map[string]any{{"role": "user", "content": "hi"}}})
		if status != 502 || errCode(out) != "upstream_error" {
			t.Fatalf("got %d %v, want 502", status, out)
		}
		if r := waitSettled(t, g, tn.Org); r["status"] != "released" {
			t.Fatalf("settled as %v, want released", r)
		}
	})
	t.Run("UpstreamClientError", func(t *testing.T) {
		tn := g.newTenant(t, "free")
		fu.fake().Enqueue(openaifake.ContextLengthExceeded())
		status, _, out := g.chat(t, tn.Key, chatBody("gpt-4o-mini", 10))
		if status != 400 || errCode(out) != "context_length_exceeded" {
			t.Fatalf("got %d %v, want the upstream's 400 passed back", status, out)
		}
		if r := waitSettled(t, g, tn.Org); r["status"] != "released" {
			t.Fatalf("settled as %v, want released", r)
		}
	})
	mustLedgerSums(t, mustPool(t, g.DBURL))
}

// tcpProxy forwards to a PostgreSQL server until cut, so a test can take the database away
// from a running gateway.
type tcpProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
}

func newTCPProxy(tb testing.TB, target string) *tcpProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }() //nolint:errcheck
			go func() { io.Copy(c, up); c.Close() }()  //nolint:errcheck
		}
	}()
	tb.Cleanup(p.cut)
	return p
}

// cut refuses new connections and drops the open ones.
func (p *tcpProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestDatabaseDown: with PostgreSQL unreachable the gateway answers 503 and never calls the
// upstream (fail closed: no unmetered request).
func TestDatabaseDown(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{})
	dbURL := dbtest.NewURL(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.ln.Addr().String()
	g := startGateway(t, viaProxy.String(), fakeConfig(fu.URL))
	tn := g.newTenant(t, "free")
	other := g.newTenant(t, "free")
	if status, _, out := g.chat(t, tn.Key, chatBody("gpt-4o-mini", 10)); status != 200 {
		t.Fatalf("warm-up: %d %v", status, out)
	}
	before := fu.fake().Requests()
	proxy.cut()
	for name, key := range map[string]string{"KnownKey": tn.Key, "UncachedKey": other.Key} {
		t.Run(name, func(t *testing.T) {
			status, _, out := g.chat(t, key, chatBody("gpt-4o-mini", 10))
			if status != 503 || errCode(out) != "ledger_unavailable" {
				t.Fatalf("got %d %v, want 503 ledger_unavailable", status, out)
			}
		})
	}
	if n := fu.fake().Requests() - before; n != 0 {
		t.Fatalf("%d requests reached the upstream while the ledger was down", n)
	}
}
