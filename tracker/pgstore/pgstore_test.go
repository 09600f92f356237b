package pgstore_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/pglog"
	"github.com/ballet/gateway/streams/pgtest"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/pgstore"
	"github.com/ballet/gateway/tracker/trackertest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// The suite, each test on a database of its own, in parallel.
func TestStore(t *testing.T) {
	trackertest.RunParallel(t, func(t *testing.T) (tracker.Store, streams.Log) {
		pool := pgtest.Pool(t)
		l, err := pglog.Open(t.Context(), pool, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return pgstore.New(pool), l
	})
}
