package memstore_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/memlog"
	"github.com/ballet/gateway/tracker"
	"github.com/ballet/gateway/tracker/memstore"
	"github.com/ballet/gateway/tracker/trackertest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestStore(t *testing.T) {
	trackertest.Run(t, func(t *testing.T) (tracker.Store, streams.Log) {
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		return memstore.New(l), l
	})
}
