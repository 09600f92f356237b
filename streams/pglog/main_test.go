package pglog_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
	"github.com/ballet/gateway/streams/pgtest"
)

func TestMain(m *testing.M) { leaktest.Main(m, pgtest.StopShared) }
