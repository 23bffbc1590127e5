// Package dbtest gives each test its own PostgreSQL database, cloned from a migrated template
// so it is fast. It needs YOSAN_TEST_DATABASE_URL (make test sets it up); without it tests fail
// with a message, never skip.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"yosan/db"
	"yosan/migrations"
)

var counter atomic.Int64

// URL returns the admin database URL for tests, failing the test when it is not set.
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("YOSAN_TEST_DATABASE_URL")
	if u == "" {
		tb.Fatal("YOSAN_TEST_DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL and sets it")
	}
	return u
}

// NewURL creates a fresh migrated database and returns its URL; it is dropped when the test
// ends.
func NewURL(tb testing.TB) string {
	tb.Helper()
	base := URL(tb)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("connect to test server: %v", err)
	}
	defer admin.Close(ctx)
	tmpl := templateName(tb)
	// One template per migration set, created once by whichever test package gets here first.
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock(7070707)`); err != nil {
		tb.Fatalf("lock template: %v", err)
	}
	var exists bool
	if err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, tmpl).Scan(&exists); err != nil {
		tb.Fatalf("check template: %v", err)
	}
	if !exists {
		if _, err := admin.Exec(ctx, `CREATE DATABASE `+tmpl); err != nil {
			tb.Fatalf("create template: %v", err)
		}
		if err := db.Migrate(withDB(tb, base, tmpl)); err != nil {
			admin.Exec(ctx, `DROP DATABASE `+tmpl) //nolint:errcheck
			tb.Fatalf("migrate template: %v", err)
		}
	}
	name := fmt.Sprintf("yt_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, counter.Add(1))
	_, err = admin.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+tmpl)
	if _, uerr := admin.Exec(ctx, `SELECT pg_advisory_unlock(7070707)`); uerr != nil && err == nil {
		err = uerr
	}
	if err != nil {
		tb.Fatalf("create test database: %v", err)
	}
	tb.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			tb.Errorf("connect to drop test database: %v", err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			tb.Errorf("drop test database: %v", err)
		}
	})
	return withDB(tb, base, name)
}

// New returns an open *db.DB on a fresh migrated database, closed when the test ends.
func New(tb testing.TB) *db.DB {
	tb.Helper()
	d, err := db.Open(context.Background(), NewURL(tb))
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(d.Close)
	return d
}

func withDB(tb testing.TB, base, name string) string {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" {
		tb.Fatalf("YOSAN_TEST_DATABASE_URL must be a postgres:// URL: %q", base)
	}
	u.Path = "/" + name
	return u.String()
}

// templateName hashes the migration files, so a changed migration gets a new template.
func templateName(tb testing.TB) string {
	tb.Helper()
	h := sha256.New()
	var names []string
	if err := fs.WalkDir(migrations.FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".sql") {
			names = append(names, p)
		}
		return err
	}); err != nil {
		tb.Fatalf("list migrations: %v", err)
	}
	sort.Strings(names)
	for _, n := range names {
		b, _ := fs.ReadFile(migrations.FS, n)
		h.Write([]byte(n))
		h.Write(b)
	}
	return "yosan_tmpl_" + hex.EncodeToString(h.Sum(nil))[:16]
}
