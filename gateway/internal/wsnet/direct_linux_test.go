//go:build !nodirect

package wsnet

import (
	"context"
	"io"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the CPU time the calling thread has used, user and system.
func threadCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTryWrite is one delivery on the direct path: a stream.event of the benchmark's
// size (338 bytes in JSON) to a peer on loopback that reads everything, batch frames a write.
// cpu-ns/op is the writing thread's CPU (the system call included, which on loopback also
// runs the receiving side), less noisy than the time on a busy machine.
func BenchmarkTryWrite(b *testing.B) {
	for _, batch := range []int{1, 8} {
		b.Run(map[int]string{1: "one", 8: "eight"}[batch], func(b *testing.B) {
			s := newTestServer(b, nil)
			c, _, a := s.dialRaw(b, nil)
			_ = c.SetDeadline(time.Time{})
			go func() { _, _ = io.Copy(io.Discard, c) }()
			frames := make([][]byte, batch)
			for i := range frames {
				frames[i] = numbered(i, 338)
			}
			outs := bodies(frames...)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.SetBytes(int64(338 * batch))
			cpu := threadCPU(b)
			for b.Loop() {
				ok, err := a.t.TryWrite(outs)
				if !ok {
					a.t.Cork()
					for _, f := range frames {
						err = a.t.Write(context.Background(), f)
					}
					if uerr := a.t.Uncork(); err == nil {
						err = uerr
					}
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
