package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/streams/migrations"
)

// DefaultURL is the server used when BALLET_TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// BaseURL returns the connection string of the test server's base database.
func BaseURL() string {
	if u := os.Getenv("BALLET_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// URL returns a connection string to a fresh, empty database, dropped (WITH (FORCE)) at the
// end of the test.
func URL(t testing.TB) string {
	t.Helper()
	return createDatabase(t, BaseURL())
}

// createDatabase creates a fresh database on the server of base, dropped at the end of the
// test, and returns its connection string.
func createDatabase(t testing.TB, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("pgtest: Postgres unreachable at BALLET_TEST_DATABASE_URL (%s): %v", redact(base), err)
		}
		t.Skipf("pgtest: Postgres unreachable at BALLET_TEST_DATABASE_URL (%s), skipping: %v", redact(base), err)
	}
	defer conn.Close(context.Background())

	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "ballet_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(base, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// Pool returns a pool on a fresh database with the migrations applied, closed at the end of
// the test (before the database is dropped).
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return migratedPool(t, URL(t))
}

// migratedPool opens a pool on u, closed at the end of the test, and applies the migrations.
func migratedPool(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrations.Apply(ctx, pool); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return pool
}

// withDatabase returns the connection string base with its database replaced by name. base is
// a URL (postgres:// or postgresql://) or a keyword/value string.
func withDatabase(base, name string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", fmt.Errorf("parse BALLET_TEST_DATABASE_URL: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// A later dbname keyword overrides an earlier one.
	return base + " dbname=" + name, nil
}

// redact hides a password in a connection URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
