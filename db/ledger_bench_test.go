package db_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"yosan/app"
	"yosan/db"
	"yosan/db/dbtest"
)

// BenchmarkReserveSettle measures the ledger alone: one reserve and one commit per request on
// one hot org, sequentially (the latency a lone request pays) and from many goroutines (the
// throughput batching buys), without and with provider quota windows (RPM, RPD, TPM held in
// the same transaction). Run: YOSAN_TEST_DATABASE_URL=$(make -s db-url) go test ./db -run '^$' -bench ReserveSettle
func BenchmarkReserveSettle(b *testing.B) {
	quota := &app.Quota{RPM: 1 << 40, RPD: 1 << 40, TPM: 1 << 50, Location: time.UTC}
	for _, bc := range []struct {
		name     string
		parallel int
		quota    *app.Quota
	}{{"Sequential", 0, nil}, {"Parallel64", 64, nil}, {"SequentialQuotas", 0, quota}, {"Parallel64Quotas", 64, quota}} {
		b.Run(bc.name, func(b *testing.B) {
			d := dbtest.New(b)
			now := fixedNow(d)
			l := db.NewLedger(d, db.LedgerConfig{})
			b.Cleanup(l.Close)
			tn := mustTenant(b, d, "bench")
			mustCap(b, l, app.Node{Kind: app.NodeOrg, ID: tn.org.ID}, 1_000_000_000)
			ctx := context.Background()
			one := func() {
				req := reserveReq(tn, 1000, now)
				req.Quotas = bc.quota.Claims("demo", "demo-mini", now, 110)
				res, err := l.Reserve(ctx, req)
				if err != nil || !res.Admitted {
					b.Fatal(err, res)
				}
				if _, err := l.Settle(ctx, app.Settlement{RequestID: res.Reservation.RequestID, Status: app.StatusCommitted,
					Actual: 900, GlobalActual: 900, LockIDs: res.Reservation.LockIDs(), QuotaIDs: res.Reservation.QuotaIDs,
					Usage: app.Usage{PromptTokens: 10, CompletionTokens: 90}}); err != nil {
					b.Fatal(err)
				}
			}
			one() // warm the budget id cache and prepared statements
			b.ResetTimer()
			if bc.parallel == 0 {
				for i := 0; i < b.N; i++ {
					one()
				}
				return
			}
			var n atomic.Int64
			b.SetParallelism(bc.parallel)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
					n.Add(1)
				}
			})
		})
	}
}
