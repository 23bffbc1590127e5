package e2e

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"yosan/app"
	"yosan/db/dbtest"
	"yosan/notify"
	"yosan/notify/mailpittest"
	"yosan/providers/openaifake"
)

// webhookSink is a customer's webhook endpoint: it verifies every signature (Standard
// Webhooks), answers failFirst requests with 500, can hold requests until released, and keeps
// what it accepted by webhook-id.
type webhookSink struct {
	*httptest.Server
	mu        sync.Mutex
	secret    string
	failFirst int
	hold      chan struct{} // non-nil: requests wait until it is closed
	arrived   chan string   // every request's webhook-id, as it arrives
	requests  int
	rejected  []string
	accepted  map[string][]string // webhook-id -> bodies accepted under it
}

func newWebhookSink(t *testing.T) *webhookSink {
	s := &webhookSink{accepted: map[string][]string{}, arrived: make(chan string, 1000)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get("webhook-id")
		s.arrived <- id
		s.mu.Lock()
		hold := s.hold
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return // the sender went away mid-request
			}
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.requests++
		if err := notify.Verify([]string{s.secret}, r.Header, body, time.Now(), 5*time.Minute); err != nil {
			s.rejected = append(s.rejected, err.Error())
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if s.requests <= s.failFirst {
			http.Error(w, "temporarily down", http.StatusInternalServerError)
			return
		}
		s.accepted[id] = append(s.accepted[id], string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *webhookSink) snapshot() (requests int, rejected []string, accepted map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acc := map[string][]string{}
	for k, v := range s.accepted {
		acc[k] = append([]string(nil), v...)
	}
	return s.requests, append([]string(nil), s.rejected...), acc
}

// waitDelivered waits until no alert event is left to fan out and no delivery is pending.
func waitDelivered(tb testing.TB, pool *pgxpool.Pool, timeout time.Duration) {
	tb.Helper()
	var unfanned, pending int
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err := pool.QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM alert_events WHERE fanned_out_at IS NULL),
				(SELECT count(*) FROM alert_deliveries WHERE status = 'pending')`).Scan(&unfanned, &pending); err != nil {
			tb.Fatal(err)
		}
		if unfanned == 0 && pending == 0 {
			return
		}
	}
	tb.Fatalf("alerts not delivered after %s: %d events not fanned out, %d deliveries pending", timeout, unfanned, pending)
}

// thresholdsAlerted returns, per node kind, every threshold alerted (with repeats, if any).
func thresholdsAlerted(tb testing.TB, pool *pgxpool.Pool) map[string][]int {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT node_kind, t FROM alert_events, unnest(crossed) AS t
		WHERE kind = 'budget.threshold_crossed' ORDER BY node_kind, t`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]int{}
	for rows.Next() {
		var kind string
		var th int
		if err := rows.Scan(&kind, &th); err != nil {
			tb.Fatal(err)
		}
		out[kind] = append(out[kind], th)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func alertsConfig(mp *mailpittest.Server, extra string) string {
	s := "alerts:\n  console_url: https://yosan.example.com\n" + extra
	if mp != nil {
		s += "  operator_emails: [ops@gateway.example]\n  smtp: {host: " + mp.SMTPHost + ", port: " +
			strconv.Itoa(mp.SMTPPort) + ", from: \"Yosan <alerts@gateway.example>\", tls: none}\n"
	}
	return s
}

// TestAlertsThroughConcurrentSpend: 300 concurrent requests through two gateways spend an org,
// a team and the global node to exactly their caps. Every threshold of every node alerts exactly
// once; the org's webhook (down for its first attempts) and email channel, and the operator's
// address, each get exactly one message per alert.
func TestAlertsThroughConcurrentSpend(t *testing.T) {
	mp := mailpittest.Start(t)
	sink := newWebhookSink(t)
	sink.failFirst = 2
	fu := newFakeUpstream(t, openaifake.Options{})
	url := dbtest.NewURL(t)
	cfg := fakeConfig(fu.URL) + alertsConfig(mp, "  poll_interval: 100ms\n  first_retry: 200ms\n")
	gws := []*gateway{startGateway(t, url, cfg), startGateway(t, url, cfg)}
	g := gws[0]
	tn := g.newTenant(t, "free")

	hook := g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/alert-channels", map[string]any{"name": "ops", "kind": "webhook", "url": sink.URL + "/yosan"}, 201)
	sink.mu.Lock()
	sink.secret = hook["secret"].(string)
	sink.mu.Unlock()
	g.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/alert-channels", map[string]any{"name": "finance", "kind": "email", "emails": []string{"cfo@acme.example"}}, 201)

	const maxTokens = 100
	body := chatBody("gpt-4o-mini", maxTokens)
	worst, est := probeWorstCase(t, g, tn, body)
	fu.swap(openaifake.Options{PromptTokens: est, CompletionTokens: maxTokens}) // actual = worst case
	spent0, _ := app.ParseMoney(g.mustAdmin(t, "GET", "/budgets/org/"+tn.Org, nil, 200)["spent"].(string))
	const k = 40
	capMicro := app.FormatMoney(spent0 + k*worst)
	for _, path := range []string{"/budgets/org/" + tn.Org, "/budgets/team/" + tn.Team, "/budgets/global"} {
		g.mustAdmin(t, "PUT", path, map[string]any{"cap": capMicro}, 200)
	}

	counts := fireConcurrent(t, gws, tn.Key, body, 300)
	if counts[200] != k || counts[429] != 300-k {
		t.Fatalf("answers %v, want %d x 200", counts, k)
	}
	pool := mustPool(t, url)
	mustLedgerSums(t, pool)
	got := thresholdsAlerted(t, pool)
	for _, kind := range []string{"org", "team", "global"} {
		if !slices.Equal(got[kind], app.DefaultThresholds) {
			t.Errorf("%s alerted %v, want each of %v once", kind, got[kind], app.DefaultThresholds)
		}
	}
	if len(got["key"])+len(got["member"]) != 0 {
		t.Errorf("uncapped nodes alerted: %v", got)
	}

	waitDelivered(t, pool, 60*time.Second)
	var orgEvents, globalEvents, failed int
	if err := pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM alert_events WHERE org_id IS NOT NULL),
			(SELECT count(*) FROM alert_events WHERE org_id IS NULL),
			(SELECT count(*) FROM alert_deliveries WHERE status <> 'sent')`).Scan(&orgEvents, &globalEvents, &failed); err != nil {
		t.Fatal(err)
	}
	if failed != 0 {
		t.Errorf("%d deliveries not sent", failed)
	}
	requests, rejected, accepted := sink.snapshot()
	if len(rejected) != 0 {
		t.Errorf("signatures rejected: %v", rejected)
	}
	if len(accepted) != orgEvents || requests != orgEvents+2 {
		t.Errorf("webhook: %d distinct messages accepted in %d requests, want %d in %d (two refused first)", len(accepted), requests, orgEvents, orgEvents+2)
	}
	for id, bodies := range accepted {
		if len(bodies) != 1 {
			t.Errorf("message %s accepted %d times", id, len(bodies))
		}
		if !strings.Contains(bodies[0], `"type":"budget.threshold_crossed"`) || !strings.Contains(bodies[0], `"console_url":"https://yosan.example.com/"`) {
			t.Errorf("webhook body %s", bodies[0])
		}
	}
	msgs := mp.WaitFor(t, orgEvents+globalEvents, 30*time.Second)
	to := map[string]int{}
	for _, m := range msgs {
		for _, a := range m.To {
			to[a.Address]++
		}
	}
	if to["cfo@acme.example"] != orgEvents || to["ops@gateway.example"] != globalEvents || len(msgs) != orgEvents+globalEvents {
		t.Errorf("emails by recipient %v (of %d), want %d to the org and %d to the operator", to, len(msgs), orgEvents, globalEvents)
	}
	// The API lists what happened, with the delivery log.
	alerts := g.mustAdmin(t, "GET", "/orgs/"+tn.Org+"/alerts", nil, 200)["data"].([]any)
	ds := g.mustAdmin(t, "GET", "/orgs/"+tn.Org+"/alert-deliveries", nil, 200)["data"].([]any)
	gds := g.mustAdmin(t, "GET", "/global/alert-deliveries", nil, 200)["data"].([]any)
	if len(alerts) != orgEvents || len(ds) != 2*orgEvents || len(gds) != globalEvents {
		t.Errorf("API: %d alerts, %d org deliveries, %d operator deliveries", len(alerts), len(ds), len(gds))
	}
}

// TestAlertSurvivesGatewayKill: the process that committed the spend dies before its worker
// sends the alert (first case) or while the webhook request is in flight (second case). Another
// gateway delivers it, and the receiver accepts it exactly once.
func TestAlertSurvivesGatewayKill(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{PromptTokens: 10, CompletionTokens: 10})

	// setup starts the victim, creates the org's webhook channel and makes one request that
	// crosses the key's 50 %; with hold set, the sink holds requests until it is closed.
	setup := func(t *testing.T, cfg string, hold chan struct{}) (*gateway, *webhookSink, *pgxpool.Pool, string) {
		url := dbtest.NewURL(t)
		sink := newWebhookSink(t)
		sink.hold = hold
		victim := startGateway(t, url, cfg)
		tn := victim.newTenant(t, "free")
		hook := victim.mustAdmin(t, "POST", "/orgs/"+tn.Org+"/alert-channels", map[string]any{"name": "ops", "kind": "webhook", "url": sink.URL}, 201)
		sink.secret = hook["secret"].(string)
		// One request crosses the key's 50 %.
		worst, _ := probeWorstCase(t, victim, tn, chatBody("gpt-4o-mini", 10))
		victim.mustAdmin(t, "PUT", "/budgets/key/"+tn.KeyID, map[string]any{"cap": app.FormatMoney(3 * worst)}, 200)
		if status, _, out := victim.chat(t, tn.Key, chatBody("gpt-4o-mini", 10)); status != 200 {
			t.Fatalf("chat: %d %v", status, out)
		}
		pool := mustPool(t, url)
		var events int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM alert_events`).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if events != 1 {
			t.Fatalf("%d alert events after the crossing commit, want 1", events)
		}
		return victim, sink, pool, url
	}
	kill := func(g *gateway) {
		g.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
		<-g.exit
	}
	checkOnce := func(t *testing.T, sink *webhookSink, pool *pgxpool.Pool, wantAttempts int) {
		waitDelivered(t, pool, 30*time.Second)
		_, rejected, accepted := sink.snapshot()
		if len(rejected) != 0 || len(accepted) != 1 {
			t.Fatalf("receiver accepted %d messages (rejected %v), want exactly one", len(accepted), rejected)
		}
		for id, bodies := range accepted {
			if len(bodies) != 1 {
				t.Errorf("message %s accepted %d times", id, len(bodies))
			}
		}
		var status string
		var attempts int
		if err := pool.QueryRow(context.Background(), `SELECT status, attempts FROM alert_deliveries`).Scan(&status, &attempts); err != nil {
			t.Fatal(err)
		}
		if status != "sent" || attempts != wantAttempts {
			t.Errorf("delivery %s after %d attempts, want sent after %d", status, attempts, wantAttempts)
		}
	}

	t.Run("BeforeTheSend", func(t *testing.T) {
		// The victim's worker polls once an hour: the alert is committed, not yet sent.
		victim, sink, pool, url := setup(t, fakeConfig(fu.URL)+alertsConfig(nil, "  poll_interval: 1h\n"), nil)
		kill(victim)
		if requests, _, _ := sink.snapshot(); requests != 0 {
			t.Fatalf("the victim sent %d requests before dying", requests)
		}
		startGateway(t, url, fakeConfig(fu.URL)+alertsConfig(nil, "  poll_interval: 100ms\n"))
		checkOnce(t, sink, pool, 1)
	})
	t.Run("DuringTheSend", func(t *testing.T) {
		cfg := fakeConfig(fu.URL) + alertsConfig(nil, "  poll_interval: 100ms\n  webhook_timeout: 2s\n  lease: 4s\n")
		hold := make(chan struct{})
		victim, sink, pool, url := setup(t, cfg, hold)
		var first string
		select {
		case first = <-sink.arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the victim never sent the webhook")
		}
		kill(victim)
		close(hold)
		startGateway(t, url, cfg)
		var second string
		select {
		case second = <-sink.arrived:
		case <-time.After(30 * time.Second):
			t.Fatal("the survivor never re-sent the webhook")
		}
		if first != second || first == "" {
			t.Errorf("webhook-id %q then %q, want the same id on the re-send", first, second)
		}
		checkOnce(t, sink, pool, 2)
	})
}
