package pglog_test

import (
	"testing"

	"github.com/ballet/gateway/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
