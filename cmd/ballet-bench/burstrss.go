package main

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// rssInterval is how often the burst mode reads the server's RSS: often
// enough to catch a peak that lasts as long as one burst's delivery.
const rssInterval = 10 * time.Millisecond

// rssSampler reads the server's VmRSS every rssInterval until stopped and
// keeps the highest reading.
type rssSampler struct {
	src    procRSS
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// Written by run, read after stop.
	peak    int64
	peakNs  int64 // nowNs of the peak reading
	samples int64
	err     error
}

// startRSS starts sampling process pid; stop ends it.
func startRSS(ctx context.Context, pid int) *rssSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &rssSampler{src: procRSS(pid), cancel: cancel}
	s.wg.Add(1)
	go s.run(ctx)
	return s
}

func (s *rssSampler) run(ctx context.Context) {
	defer s.wg.Done()
	t := time.NewTicker(rssInterval)
	defer t.Stop()
	for {
		v, err := s.src.rss(ctx)
		if err != nil {
			s.err = err
			return
		}
		s.samples++
		if v > s.peak {
			s.peak, s.peakNs = v, nowNs()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// stop ends the sampling and waits for it; safe to call twice.
func (s *rssSampler) stop() {
	s.cancel()
	s.wg.Wait()
}

// serverTicks is the CPU time process pid has used, in clock ticks (the
// /proc/PID/stat sampling of --db-pid).
func serverTicks(pid int) (int64, error) {
	ticks, _, err := statTicks(strconv.Itoa(pid))
	return ticks, err
}
