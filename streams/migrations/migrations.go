package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed *.sql
var files embed.FS

// ErrOutdated means the database lacks migrations this binary needs. Check returns it inside
// an *OutdatedError.
var ErrOutdated = errors.New("migrations: database schema is outdated")

// OutdatedError says where the database schema is and where this binary needs it.
type OutdatedError struct {
	At   string // highest version applied, "none" for an empty database
	Need string // Latest()
}

func (e *OutdatedError) Error() string {
	return fmt.Sprintf("database schema is at %s, this binary needs %s: run `ballet-gateway migrate` or start with --migrate", e.At, e.Need)
}

func (e *OutdatedError) Unwrap() error { return ErrOutdated }

// lockKey (0x62616c6c65740002) serializes Apply across processes.
const lockKey int64 = 7089066501272240130

type migration struct {
	version string // file name without ".sql"
	sql     string
}

var all = mustLoad()

func mustLoad() []migration {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		panic(err)
	}
	slices.Sort(names)
	ms := make([]migration, 0, len(names))
	for _, n := range names {
		b, err := files.ReadFile(n)
		if err != nil {
			panic(err)
		}
		ms = append(ms, migration{version: strings.TrimSuffix(n, ".sql"), sql: string(b)})
	}
	if len(ms) == 0 {
		panic("migrations: no embedded migrations")
	}
	return ms
}

// Latest returns the version of the newest migration this binary carries.
func Latest() string { return all[len(all)-1].version }

// Versions returns the versions of all embedded migrations, oldest first.
func Versions() []string {
	vs := make([]string, len(all))
	for i, m := range all {
		vs[i] = m.version
	}
	return vs
}

// Apply applies the migrations the database lacks, each in its own transaction, and returns
// their versions. It holds a session advisory lock for its whole run, so concurrent calls from
// several processes apply each migration exactly once.
func Apply(ctx context.Context, pool *pgxpool.Pool) (applied []string, err error) {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	unlocked := false
	defer func() {
		if !unlocked {
			// A connection that may still hold the lock must not go back to the pool.
			_ = c.Conn().Close(context.Background())
		}
		c.Release()
	}()
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return nil, fmt.Errorf("migrate: take lock: %w", err)
	}
	applied, err = applyLocked(ctx, c)
	if _, uerr := c.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey); uerr == nil {
		unlocked = true
	}
	return applied, err
}

func applyLocked(ctx context.Context, c *pgxpool.Conn) ([]string, error) {
	if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	done, err := appliedVersions(ctx, c)
	if err != nil {
		return nil, err
	}
	applied := []string{}
	for _, m := range all {
		if done[m.version] {
			continue
		}
		tx, err := c.Begin(ctx)
		if err != nil {
			return applied, fmt.Errorf("migrate %s: %w", m.version, err)
		}
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			_ = tx.Rollback(ctx)
			return applied, fmt.Errorf("migrate %s: %w", m.version, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.version); err != nil {
			_ = tx.Rollback(ctx)
			return applied, fmt.Errorf("migrate %s: record version: %w", m.version, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return applied, fmt.Errorf("migrate %s: commit: %w", m.version, err)
		}
		applied = append(applied, m.version)
	}
	return applied, nil
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// appliedVersions returns the versions recorded in schema_migrations (none when the table
// does not exist).
func appliedVersions(ctx context.Context, q querier) (map[string]bool, error) {
	rows, err := q.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			return map[string]bool{}, nil
		}
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	vs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
			return map[string]bool{}, nil
		}
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	done := make(map[string]bool, len(vs))
	for _, v := range vs {
		done[v] = true
	}
	return done, nil
}

// Check returns nil when every embedded migration is applied, and an *OutdatedError (matching
// ErrOutdated) when some are missing.
func Check(ctx context.Context, pool *pgxpool.Pool) error {
	done, err := appliedVersions(ctx, pool)
	if err != nil {
		return fmt.Errorf("check schema: %w", err)
	}
	missing := false
	for _, m := range all {
		if !done[m.version] {
			missing = true
			break
		}
	}
	if !missing {
		return nil
	}
	at := "none"
	for v := range done {
		if at == "none" || v > at {
			at = v
		}
	}
	return &OutdatedError{At: at, Need: Latest()}
}
