package gatewaytest

import (
	"net/http"
	"sync/atomic"
)

type atomicHandler = atomic.Pointer[http.Handler]
