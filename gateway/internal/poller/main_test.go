package poller

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
)

// TestMain fails when a goroutine of this package outlives the tests: a poller's loop.
func TestMain(m *testing.M) { leaktest.Main(m) }
