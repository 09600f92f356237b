//go:build !noparallel

package streams

// parallelFanout spreads the subscribers of a stream with 2*fanoutChunk
// or more over the CPUs (Hub.deliverParallel). A build with -tags
// noparallel leaves it out, and every stream is delivered on the
// dispatch's goroutine alone: the comparison in docs/benchmarks.md.
const parallelFanout = true
