package e2e

import (
	"bufio"
	"context"
	"syscall"
	"testing"
	"time"

	"yosan/db/dbtest"
	"yosan/providers/openaifake"
)

// TestCrashedGatewaySwept: a gateway killed in the middle of a request leaves its reservation
// pending; another gateway's sweeper settles it after the deadline, charging the reserved
// worst case (the upstream may have billed it), exactly once.
func TestCrashedGatewaySwept(t *testing.T) {
	fu := newFakeUpstream(t, openaifake.Options{PromptTokens: 20, CompletionTokens: 60, ChunkDelay: 20 * time.Millisecond})
	url := dbtest.NewURL(t)
	// The request must still be in flight when the victim is killed: its timeout leaves a wide
	// margin for a loaded machine (the whole suite runs in parallel under -race).
	fast := "request_timeout: 4s\nsettle_margin: 0s\nsweeper: {interval: 200ms}\n"
	victim := startGateway(t, url, fakeConfig(fu.URL)+fast)
	tn := victim.newTenant(t, "free")

	fu.fake().Enqueue(openaifake.Response{Kind: openaifake.Hang, After: 2})
	resp := streamRequest(t, context.Background(), victim, tn.Key, 100)
	defer resp.Body.Close()
	if got := readEvents(bufio.NewReader(resp.Body), 2); len(got) != 2 {
		t.Fatalf("read %d events before the crash", len(got))
	}
	victim.cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck
	<-victim.exit

	pool := mustPool(t, url)
	var pending int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM reservations WHERE status = 'pending'`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 1 {
		t.Fatalf("%d pending reservations after the crash, want the one in flight", pending)
	}

	// Two survivors sweep; the reservation is settled once.
	startGateway(t, url, fakeConfig(fu.URL)+fast)
	startGateway(t, url, fakeConfig(fu.URL)+fast)
	deadline := time.Now().Add(20 * time.Second)
	var status string
	var amount, actual int64
	for time.Now().Before(deadline) {
		if err := pool.QueryRow(context.Background(), `SELECT status, amount, coalesce(actual, -1) FROM reservations`).Scan(&status, &amount, &actual); err != nil {
			t.Fatal(err)
		}
		if status != "pending" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != "expired" || actual != amount {
		t.Fatalf("reservation %s with actual %d, want expired and charged the reserved %d", status, actual, amount)
	}
	mustLedgerSums(t, pool)
}
