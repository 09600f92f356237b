package pgtest

import (
	"context"
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ballet/gateway/internal/pgstandby"
)

// StandbyDB is a fresh database on a primary and the hot standby that streams from it.
type StandbyDB struct {
	Pair *pgstandby.Pair
	// PrimaryURL and StandbyURL name the same database on either server.
	PrimaryURL, StandbyURL string
	// Pool is a pool on the primary, closed at the end of the test.
	Pool *pgxpool.Pool
}

var shared struct {
	mu   sync.Mutex
	pair *pgstandby.Pair
	err  error
}

// Standby returns a fresh database with the migrations applied on a primary+standby pair
// shared by the test binary (started on first use; StopShared stops it), already replayed on
// the standby. The database is dropped at the end of the test. Tests that stop or pause the
// standby use a pair of their own (NewPair, then StandbyOn).
func Standby(t testing.TB) *StandbyDB {
	t.Helper()
	shared.mu.Lock()
	if shared.pair == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		shared.pair, shared.err = pgstandby.Start(ctx, nil)
		cancel()
	}
	pair, err := shared.pair, shared.err
	shared.mu.Unlock()
	if err != nil {
		noStandby(t, err)
	}
	return StandbyOn(t, pair)
}

// StopShared stops the shared pair, if one was started. Call it from TestMain after m.Run.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pair != nil {
		_ = shared.pair.Close()
		shared.pair = nil
	}
}

// NewPair starts a primary+standby pair for this test alone, closed at its end.
func NewPair(t testing.TB, opts *pgstandby.Options) *pgstandby.Pair {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pair, err := pgstandby.Start(ctx, opts)
	if err != nil {
		noStandby(t, err)
	}
	t.Cleanup(func() { _ = pair.Close() })
	return pair
}

// StandbyOn is Standby on a given pair.
func StandbyOn(t testing.TB, pair *pgstandby.Pair) *StandbyDB {
	t.Helper()
	primary := createDatabase(t, pair.Primary.URL("postgres"))
	db := &StandbyDB{Pair: pair, PrimaryURL: primary, Pool: migratedPool(t, primary)}
	name := db.Pool.Config().ConnConfig.Database
	db.StandbyURL = pair.Standby.URL(name)
	db.WaitReplayed(t)
	return db
}

// WaitReplayed waits until the standby has replayed everything written on the primary so far.
func (db *StandbyDB) WaitReplayed(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := db.Pair.WaitReplayed(ctx); err != nil {
		t.Fatal(err)
	}
}

// StandbyPool opens a pool on the standby's copy of the database, closed at the end of the test.
func (db *StandbyDB) StandbyPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return db.StandbyPoolWith(t, nil)
}

// StandbyPoolWith is StandbyPool with its configuration adjusted by configure, when not nil.
func (db *StandbyDB) StandbyPoolWith(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(db.StandbyURL)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// AlternateStandbys makes a pool configuration act like a pooler in front of all the pair's
// standbys: every query on a connection of its own, to each standby in turn.
func AlternateStandbys(pair *pgstandby.Pair) func(*pgxpool.Config) {
	ports := []uint16{uint16(pair.Standby.Port)}
	for _, s := range pair.More {
		ports = append(ports, uint16(s.Port))
	}
	var turn atomic.Int64
	return func(cfg *pgxpool.Config) {
		cfg.BeforeConnect = func(_ context.Context, cc *pgx.ConnConfig) error {
			cc.Port = ports[int(turn.Add(1))%len(ports)]
			return nil
		}
		cfg.AfterRelease = func(*pgx.Conn) bool { return false }
	}
}

// noStandby skips t when no PostgreSQL installation is found, except with CI=true, and fails
// it for any other error.
func noStandby(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, pgstandby.ErrNoPostgres) && os.Getenv("CI") != "true" {
		t.Skipf("pgtest: %v (set BALLET_PG_BIN); skipping", err)
	}
	t.Fatalf("pgtest: cannot run a primary and a standby: %v", err)
}
