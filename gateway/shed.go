package gateway

import (
	"strconv"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/internal/admission"
	"github.com/ballet/gateway/rpc"
)

// The replica's budget for queued bytes (BALLET_REPLICA_QUEUE_BYTES) is kept by
// internal/admission's Shedder; what is here is what it closes: the sessions, each counted,
// logged and closed 1013 as one of the most behind.

// Config.ReplicaQueueBytes' default: the Go memory limit over ReplicaQueueDivisor, or
// DefaultReplicaQueueBytes without one.
const (
	DefaultReplicaQueueBytes = admission.DefaultQueueBudget
	ReplicaQueueDivisor      = admission.QueueBudgetDivisor
)

// QueuedBytes is what the replica's connections have queued and not yet written.
func (s *Server) QueuedBytes() int64 { return s.queued.Bytes() }

// QueuedBytesBudget is BALLET_REPLICA_QUEUE_BYTES as the server applies it.
func (s *Server) QueuedBytesBudget() int64 { return s.queued.Limit() }

// newShedder is the shedder of the replica's sessions, and the Total every session's
// connection tells, which starts it past the budget.
func (s *Server) newShedder() (*admission.Shedder[*session], *rpc.Total) {
	shedder := admission.NewShedder(&admission.ShedOptions[*session]{
		Budget:  int64(s.cfg.ReplicaQueueBytes),
		Total:   func() int64 { return s.queued.Bytes() },
		Conns:   s.openSessions,
		Queued:  func(sess *session) int64 { return sess.conn.QueuedBytes() },
		Closing: (*session).closing,
		Shed:    s.shed,
	})
	return shedder, rpc.NewTotal(shedder.Budget(), shedder.Over)
}

// shed closes sess, which had queued bytes, as one of the replica's most behind.
func (s *Server) shed(sess *session, queued int64) {
	s.metrics.LimitRejections.WithLabelValues(limitReplicaQueuedBytes).Inc()
	sess.logger().Info("connection closed: the replica holds too much for its clients", "queued_bytes", queued,
		"replica_queued_bytes", s.queued.Bytes(), "replica_queue_bytes_max", s.queued.Limit())
	sess.conn.Shed()
	sess.closeWith(websocket.StatusTryAgainLater, "replica over its budget: "+strconv.FormatInt(queued, 10)+" bytes queued")
}
