package pgstore_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/planner/pgstore"
	"github.com/ballet/gateway/planner/plannertest"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	trackerpg "github.com/ballet/gateway/tracker/pgstore"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestStore(t *testing.T) {
	plannertest.Run(t, func(t *testing.T) plannertest.Env {
		pool := pgtest.Pool(t)
		l, err := pglog.Open(t.Context(), pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return plannertest.Env{Store: pgstore.New(pool), Log: l, Tracker: trackerpg.New(pool)}
	})
}
