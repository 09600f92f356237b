package gateway

import (
	"cmp"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/rpc"
)

// The replica's budget for queued bytes (BALLET_REPLICA_QUEUE_BYTES): what every
// connection has queued and not yet written, together. Past it the connections with the
// most queued are closed 1013 until the sum is back under shedTarget of the budget; their
// clients reconnect (to this replica or another) and resume from their last seq.

// Config.ReplicaQueueBytes' default: the Go memory limit over ReplicaQueueDivisor, or
// DefaultReplicaQueueBytes without one.
const (
	DefaultReplicaQueueBytes = 1 << 30
	ReplicaQueueDivisor      = 4
)

// shedPause is how long the shedder waits between rounds for the connections it closed
// to let their queues go.
const shedPause = 25 * time.Millisecond

// replicaQueueBytes is the budget: the setting, or a quarter of the Go memory limit
// (GOMEMLIMIT, which serve sets from the container's limit), or 1 GiB without one.
func replicaQueueBytes(setting int) int64 {
	if setting > 0 {
		return int64(setting)
	}
	if lim := debug.SetMemoryLimit(-1); lim > 0 && lim < math.MaxInt64 {
		return lim / ReplicaQueueDivisor
	}
	return DefaultReplicaQueueBytes
}

// QueuedBytes is what the replica's connections have queued and not yet written.
func (s *Server) QueuedBytes() int64 { return s.queued.Bytes() }

// QueuedBytesBudget is BALLET_REPLICA_QUEUE_BYTES as the server applies it.
func (s *Server) QueuedBytesBudget() int64 { return s.queued.Limit() }

// overBudget runs as the queued bytes pass the budget (rpc.NewTotal's over: on a
// sender's goroutine, with its connection locked): it starts the shedder unless it runs.
func (s *Server) overBudget() {
	s.shedMu.Lock()
	defer s.shedMu.Unlock()
	if s.shedDone != nil || s.ctx.Err() != nil {
		return
	}
	s.shedDone = make(chan struct{})
	go s.shed()
}

// shed closes connections, most queued first, while the replica is over its budget. It
// runs only then, and Shutdown waits for it.
func (s *Server) shed() {
	for {
		for s.queued.Bytes() > s.queued.Limit() && s.ctx.Err() == nil {
			s.shedRound()
			t := time.NewTimer(shedPause)
			select {
			case <-t.C:
			case <-s.ctx.Done():
				t.Stop()
			}
		}
		s.shedMu.Lock()
		// Over again since the loop looked: overBudget saw the shedder running.
		if s.queued.Bytes() > s.queued.Limit() && s.ctx.Err() == nil {
			s.shedMu.Unlock()
			continue
		}
		close(s.shedDone)
		s.shedDone = nil
		s.shedMu.Unlock()
		return
	}
}

// shedTarget is the part of the budget a round sheds down to, so that the next burst does
// not start another round at once.
const shedTarget = 0.75

// shedRound closes the connections with the most queued until what is left, counting
// the connections already closing as gone, is under shedTarget of the budget.
func (s *Server) shedRound() {
	type queuedConn struct {
		sess  *session
		bytes int64
	}
	var open []queuedConn
	excess := s.queued.Bytes() - int64(shedTarget*float64(s.queued.Limit()))
	for _, sess := range s.openSessions() {
		b := sess.conn.QueuedBytes()
		if sess.closing() {
			excess -= b
		} else if b > 0 {
			open = append(open, queuedConn{sess, b})
		}
	}
	slices.SortFunc(open, func(a, b queuedConn) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, q := range open {
		if excess <= 0 {
			return
		}
		excess -= q.bytes
		s.metrics.LimitRejections.WithLabelValues(limitReplicaQueuedBytes).Inc()
		q.sess.logger().Info("connection closed: the replica holds too much for its clients", "queued_bytes", q.bytes,
			"replica_queued_bytes", s.queued.Bytes(), "replica_queue_bytes_max", s.queued.Limit())
		q.sess.conn.Shed()
		q.sess.closeWith(websocket.StatusTryAgainLater, "replica over its budget: "+strconv.FormatInt(q.bytes, 10)+" bytes queued")
	}
}

// newQueuedTotal is the Total every session's connection tells.
func (s *Server) newQueuedTotal() *rpc.Total {
	return rpc.NewTotal(replicaQueueBytes(s.cfg.ReplicaQueueBytes), s.overBudget)
}

// stopShedding waits for a running shedder, once the server's context is cancelled.
func (s *Server) stopShedding() {
	s.shedMu.Lock()
	done := s.shedDone
	s.shedMu.Unlock()
	if done != nil {
		<-done
	}
}
