package pgtest

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestURLCreatesAndDrops(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		conn, err := pgx.Connect(t.Context(), URL(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(t.Context())
		if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "ballet_test_") {
			t.Fatalf("database %q", name)
		}
		var tables int
		if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&tables); err != nil || tables != 0 {
			t.Fatalf("fresh database has %d tables, %v", tables, err)
		}
	})
	conn, err := pgx.Connect(t.Context(), BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database %s still exists after the test (%d, %v)", name, n, err)
	}
}

func TestPoolIsMigrated(t *testing.T) {
	pool := Pool(t)
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM events").Scan(&n); err != nil || n != 0 {
		t.Fatalf("events: %d, %v", n, err)
	}
}

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct{ base, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/x?sslmode=disable"},
		{"postgresql://u:p@h/db", "postgresql://u:p@h/x"},
		{"postgres://h", "postgres://h/x"},
		{"host=h dbname=test", "host=h dbname=test dbname=x"},
	} {
		got, err := withDatabase(tc.base, "x")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.base, got, err, tc.want)
		}
		if cfg, err := pgx.ParseConfig(got); err != nil || cfg.Database != "x" {
			t.Errorf("%q parses to database %v, %v", got, cfg, err)
		}
	}
	if got := redact("postgres://u:secret@h/db"); strings.Contains(got, "secret") {
		t.Errorf("redact left the password: %s", got)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// A row written on the primary is read on the standby once replayed; the standby refuses writes.
func TestStandby(t *testing.T) {
	db := Standby(t)
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO events (project_key, type, entity_type, entity_id, actor_kind, actor_subject)
		VALUES ('WEB', 't', 'x', '1', 'system', '')`); err != nil {
		t.Fatal(err)
	}
	db.WaitReplayed(t)
	sp := db.StandbyPool(t)
	var n int
	var recovery bool
	if err := sp.QueryRow(t.Context(), "SELECT count(*), pg_is_in_recovery() FROM events").Scan(&n, &recovery); err != nil || n != 1 || !recovery {
		t.Fatalf("standby: %d events, in recovery %v, %v", n, recovery, err)
	}
	if _, err := sp.Exec(t.Context(), "DELETE FROM events"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("a write on the standby: %v", err)
	}
}
