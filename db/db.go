// Package db is Yosan's PostgreSQL layer: the pool, migrations, one file per aggregate with the
// SQL inline, and the reservation ledger (ledger.go), the heart of the product.
package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"yosan/app"
	"yosan/migrations"
)

// DB is the connection pool plus the services built on it.
type DB struct {
	Pool *pgxpool.Pool
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// Open connects to url (a PostgreSQL URL or DSN) and checks the connection.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if cfg.MaxConns < 16 {
		cfg.MaxConns = 16
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	// The ledger statements run thousands of times a second with the same shape: plan them
	// once (a custom plan per execution costs more than the statement itself).
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &DB{Pool: pool, Now: time.Now}, nil
}

// Close closes the pool.
func (db *DB) Close() { db.Pool.Close() }

// Migrate applies every pending migration to the database at url.
func Migrate(url string) error {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return fmt.Errorf("open migrations: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database url: %w", err)
	}
	sqlDB := stdlib.OpenDB(*cfg.ConnConfig)
	defer sqlDB.Close()
	drv, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		return fmt.Errorf("open migrate driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		return fmt.Errorf("init migrate: %w", err)
	}
	defer m.Close()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("apply migrations: %w", err)
	}
	return nil
}

// FormatError maps driver errors to app errors: unreachable database -> EUNAVAILABLE (the
// gateway fails closed), constraint violations -> EINVALID / ECONFLICT. Other errors are
// returned unchanged (they become EINTERNAL).
func FormatError(err error) error {
	if err == nil {
		return nil
	}
	if app.AsError(err) != nil {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return app.WrapError(app.ECONFLICT, err, "already exists")
		case "23503":
			return app.WrapError(app.ENOTFOUND, err, "a referenced object does not exist")
		case "23514", "22P02", "22023":
			return app.WrapError(app.EINVALID, err, "invalid value")
		case "57P01", "57P02", "57P03", "53300", "08000", "08003", "08006", "08001", "08004":
			return app.WrapError(app.EUNAVAILABLE, err, "the budget ledger is unavailable; no request is sent upstream without it")
		}
		return err
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNREFUSED) {
		return app.WrapError(app.EUNAVAILABLE, err, "the budget ledger is unavailable; no request is sent upstream without it")
	}
	return err
}
