package memlog_test

import (
	"testing"

	"github.com/ballet/gateway/streams"
	"github.com/ballet/gateway/streams/logtest"
	"github.com/ballet/gateway/streams/memlog"
)

func TestConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) (streams.Log, streams.Appender) {
		l := memlog.New()
		t.Cleanup(func() { l.Close() })
		return l, l
	})
}
