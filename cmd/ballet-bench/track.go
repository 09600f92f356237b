package main

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// commitLog records, for every event the benchmark's writers committed,
// the time the COMMIT returned (Unix ns, in this process' clock). It is
// indexed by seq − base and grows by fixed chunks, so writers and readers
// share it without a lock on the hot path.
type commitLog struct {
	base   int64 // seqs ≤ base are not ours
	mu     sync.Mutex
	chunks [commitChunks]atomic.Pointer[[commitChunk]atomic.Int64]
	count  atomic.Int64
	maxSeq atomic.Int64
}

const (
	commitChunk  = 1 << 16
	commitChunks = 1 << 14 // 2^30 events past base
)

func newCommitLog(base int64) *commitLog {
	c := &commitLog{base: base}
	c.maxSeq.Store(base)
	return c
}

// set records seq's commit time; it reports false for a seq out of range.
func (c *commitLog) set(seq, ns int64) bool {
	i := seq - c.base - 1
	if i < 0 || i >= commitChunk*commitChunks {
		return false
	}
	p := c.chunks[i/commitChunk].Load()
	if p == nil {
		c.mu.Lock()
		if p = c.chunks[i/commitChunk].Load(); p == nil {
			p = new([commitChunk]atomic.Int64)
			c.chunks[i/commitChunk].Store(p)
		}
		c.mu.Unlock()
	}
	if p[i%commitChunk].Swap(ns) == 0 {
		c.count.Add(1)
	}
	for {
		m := c.maxSeq.Load()
		if seq <= m || c.maxSeq.CompareAndSwap(m, seq) {
			return true
		}
	}
}

// get returns seq's commit time, or 0 when it is not (yet) known.
func (c *commitLog) get(seq int64) int64 {
	i := seq - c.base - 1
	if i < 0 || i >= commitChunk*commitChunks {
		return 0
	}
	p := c.chunks[i/commitChunk].Load()
	if p == nil {
		return 0
	}
	return p[i%commitChunk].Load()
}

// bitmap returns the committed seqs as a bitmap over seq − base − 1, up to
// maxSeq. Call it once the writers have stopped.
func (c *commitLog) bitmap() []uint64 {
	n := c.maxSeq.Load() - c.base
	bm := make([]uint64, (n+63)/64)
	for i := int64(0); i < n; i++ {
		p := c.chunks[i/commitChunk].Load()
		if p == nil {
			i += commitChunk - i%commitChunk - 1
			continue
		}
		if p[i%commitChunk].Load() != 0 {
			bm[i/64] |= 1 << (i % 64)
		}
	}
	return bm
}

// tracker checks one subscription's deliveries: every seq past base is
// recorded in a bitmap, so duplicates, order and (against the commit log)
// gaps can be counted. Only the connection's reader goroutine writes it;
// last is atomic so that the run can watch progress.
type tracker struct {
	base       int64
	bits       []uint64
	last       atomic.Int64 // highest seq received
	received   int64        // events past base received, duplicates included
	dups       int64
	outOfOrder int64
	lagged     bool        // closed with reason lagging
	closed     string      // another close reason, if any
	ended      atomic.Bool // closed by the server, or the connection was lost
	firstNs    int64       // receive time of the first event past base
	lastNs     int64       // receive time of the latest event past base
	pending    []pendingLatency

	// target, when set, is closed once seq ≥ targetSeq has been received.
	targetSeq int64
	target    chan struct{}
}

// pendingLatency is an event that arrived before its writer had recorded
// the commit time; it is resolved when the run ends.
type pendingLatency struct{ seq, recvNs int64 }

const maxPending = 4096

func newTracker(base int64) *tracker {
	t := &tracker{base: base}
	t.last.Store(base)
	return t
}

// watch arranges for the returned channel to close once seq has arrived.
// Call it before the subscription can receive seq.
func (t *tracker) watch(seq int64) <-chan struct{} {
	t.targetSeq = seq
	t.target = make(chan struct{})
	return t.target
}

// event records one delivery; lat receives the commit → receive latency
// when the commit time is known.
func (t *tracker) event(seq, nowNs int64, commits *commitLog, lat *histogram, pendingDropped *atomic.Int64) {
	if seq <= t.base {
		return
	}
	i := seq - t.base - 1
	w := int(i / 64)
	if w >= len(t.bits) {
		t.bits = append(t.bits, make([]uint64, w-len(t.bits)+1+len(t.bits)/4)...)
	}
	mask := uint64(1) << (i % 64)
	t.received++
	if t.firstNs == 0 {
		t.firstNs = nowNs
	}
	t.lastNs = nowNs
	last := t.last.Load()
	switch {
	case t.bits[w]&mask != 0:
		t.dups++
		return
	case seq <= last:
		t.outOfOrder++
	default:
		t.last.Store(seq)
	}
	t.bits[w] |= mask
	if commits != nil {
		if c := commits.get(seq); c != 0 {
			lat.record(nowNs - c)
		} else if len(t.pending) < maxPending {
			t.pending = append(t.pending, pendingLatency{seq, nowNs})
		} else {
			pendingDropped.Add(1)
		}
	}
	if t.target != nil && seq >= t.targetSeq {
		close(t.target)
		t.target = nil
	}
}

// resolve records the latencies of events that arrived before their
// commit time was known, and of which the commit log now knows.
func (t *tracker) resolve(commits *commitLog, lat *histogram) (early int64) {
	for _, p := range t.pending {
		if c := commits.get(p.seq); c != 0 {
			lat.record(p.recvNs - c)
			if p.recvNs < c {
				early++
			}
		}
	}
	t.pending = nil
	return early
}

// gaps counts the committed seqs (bitmap from commitLog.bitmap, same
// base) that this subscription never received.
func (t *tracker) gaps(committed []uint64) int64 {
	var n int
	for w, c := range committed {
		var r uint64
		if w < len(t.bits) {
			r = t.bits[w]
		}
		n += bits.OnesCount64(c &^ r)
	}
	return int64(n)
}

// delivered counts the committed seqs this subscription received.
func (t *tracker) delivered(committed []uint64) int64 {
	var n int
	for w, c := range committed {
		if w < len(t.bits) {
			n += bits.OnesCount64(c & t.bits[w])
		}
	}
	return int64(n)
}

// histogram is a log-linear histogram of durations in microseconds with
// 64 sub-buckets per power of two (under 1.6 % error), safe for concurrent
// record. Negative values count as 0.
type histogram struct {
	buckets [histBuckets]atomic.Int64
	count   atomic.Int64
	sum     atomic.Int64 // µs
	max     atomic.Int64 // ns
}

const (
	histSubBits = 6
	histBuckets = (40 - histSubBits + 1) << histSubBits // up to 2^40 µs
)

func histIndex(us uint64) int {
	if us < 1<<histSubBits {
		return int(us)
	}
	exp := bits.Len64(us) - histSubBits - 1
	i := (exp+1)<<histSubBits + int((us>>exp)&(1<<histSubBits-1))
	return min(i, histBuckets-1)
}

// histValue is the middle of bucket i, in µs.
func histValue(i int) float64 {
	if i < 1<<histSubBits {
		return float64(i)
	}
	exp := i>>histSubBits - 1
	mant := uint64(i & (1<<histSubBits - 1))
	low := (1<<histSubBits + mant) << exp
	return float64(low) + float64(uint64(1)<<exp)/2
}

// record adds one duration in ns.
func (h *histogram) record(ns int64) {
	if ns < 0 {
		ns = 0
	}
	us := uint64(ns / 1000)
	h.buckets[histIndex(us)].Add(1)
	h.count.Add(1)
	h.sum.Add(int64(us))
	for {
		m := h.max.Load()
		if ns <= m || h.max.CompareAndSwap(m, ns) {
			return
		}
	}
}

// quantile returns the q-quantile (0 < q ≤ 1) in milliseconds, 0 when empty.
func (h *histogram) quantile(q float64) float64 {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q*float64(n) + 0.5)
	rank = max(rank, 1)
	var seen int64
	for i := range h.buckets {
		seen += h.buckets[i].Load()
		if seen >= rank {
			v := histValue(i) / 1000
			if m := float64(h.max.Load()) / 1e6; v > m {
				v = m
			}
			return v
		}
	}
	return float64(h.max.Load()) / 1e6
}

// mean returns the mean in milliseconds.
func (h *histogram) mean() float64 {
	n := h.count.Load()
	if n == 0 {
		return 0
	}
	return float64(h.sum.Load()) / float64(n) / 1000
}

// maxMs returns the largest value in milliseconds.
func (h *histogram) maxMs() float64 { return float64(h.max.Load()) / 1e6 }
