// Package timerheap runs the heartbeat deadlines of many values from one runtime timer: a
// min-heap of their due times, the timer set for the earliest, so that an idle connection
// holds a place in the heap rather than a runtime timer and a closure of its own.
//
// Entry points: Timers (its zero value is ready) schedules and removes values that implement
// Beater; each holds its Timer, its place in the heap.
//
// Caveats: a value's Schedule and Remove are called one at a time (its owner's lock), and
// Heartbeat runs on the timer's goroutine, outside Timers' lock, where it may call Schedule.
// A build with -tags notimerheap gives each value a runtime timer instead (timers_off.go), to
// measure what the heap saves (docs/benchmarks.md).
package timerheap
