package memstore_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/planner/memstore"
	"github.com/ballet/gateway/planner/plannertest"
	"github.com/ballet/gateway/streams/memlog"
	trackermem "github.com/ballet/gateway/tracker/memstore"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestStore(t *testing.T) {
	plannertest.Run(t, func(t *testing.T) plannertest.Env {
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		return plannertest.Env{Store: memstore.New(l), Log: l, Tracker: trackermem.New(l)}
	})
}
