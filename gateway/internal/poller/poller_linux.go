//go:build linux && !nopark

package poller

import (
	"errors"
	"sync"
	"syscall"
)

// Poller lets idle connections wait for their next message without a
// goroutine: a connection with nothing to read parks (its reader's goroutine
// returns, and with it its stack) and one epoll loop resumes it when the
// socket turns readable or closes. At thousands of idle WebSockets this
// halves the memory each one costs. Sockets served by their descriptor (Own)
// wait on the same loop.
//
// The loop runs while at least one connection is registered and stops with
// the last one, so it never outlives the sessions that use it.
type Poller struct {
	mu     sync.Mutex // guards the fields below and every Conn's
	loop   *pollLoop  // while refs > 0
	refs   int        // registered connections
	conns  []*Conn    // registered connections by slot, nil for a free one
	free   []uint32   // free slots of conns
	gen    uint32     // the generation of the latest registration
	broken bool       // epoll failed: connections read with a goroutine each
}

// pollLoop is one epoll instance and the goroutine waiting on it. Event
// data 0 is the wake-up pipe; a connection's is its slot in conns plus 1
// and its generation (eventData). Its fields are set by startPollLoop and
// read-only after; done is closed by run.
type pollLoop struct {
	epfd         int
	wakeR, wakeW int
	done         chan struct{}
}

// Conn is one connection's registration. Its fields but ip and rc (set
// by Poller.Conn, read-only) are guarded by the poller's mutex, not one of its
// own: a registration changes together with the poller's table of
// connections and its count of registered ones, which the loop reads for
// many connections in one critical section, and a lock each would grow
// every socket. A registered connection's loop is the poller's: the loop
// stops only with the last registered connection.
//
// Three callbacks wait on a registration, each run once when the socket is
// ready for it or the registration closes: resume, the parked reader's;
// rwait and wwait, a read and a write of a socket served by its descriptor
// (fdconn_linux.go) that found it not ready.
type Conn struct {
	ip         *Poller
	rc         syscall.RawConn
	resume     func() // set while parked
	rwait      func() // set while a read waits for the socket
	wwait      func() // set while a write waits for the socket
	slot       uint32 // in ip.conns, once registered
	gen        uint32 // the registration's generation: an event of an earlier one is stale
	registered bool
	added      bool // the fd is in the loop's epoll set
	noPark     bool // StopParking ran: the reader no longer parks
	closed     bool
}

// New returns a Poller; its loop starts with the first registration.
func New() *Poller { return &Poller{} }

// eventData is what epoll reports for the registration slot, gen: never 0, the wake-up pipe's.
func eventData(slot, gen uint32) (int32, int32) { return int32(slot + 1), int32(gen) }

// registerLocked gives pc a slot and a generation.
func (ip *Poller) registerLocked(pc *Conn) {
	ip.gen++
	pc.gen = ip.gen
	if n := len(ip.free); n > 0 {
		pc.slot = ip.free[n-1]
		ip.free = ip.free[:n-1]
		ip.conns[pc.slot] = pc
	} else {
		pc.slot = uint32(len(ip.conns))
		ip.conns = append(ip.conns, pc)
	}
	pc.registered = true
	ip.refs++
}

// lookupLocked is the registration an event reports, nil when it is stale.
func (ip *Poller) lookupLocked(fd, pad int32) *Conn {
	slot := uint32(fd) - 1
	if slot >= uint32(len(ip.conns)) {
		return nil
	}
	if pc := ip.conns[slot]; pc != nil && pc.gen == uint32(pad) {
		return pc
	}
	return nil
}

// Conn returns a registration for the connection rc, one that is not
// pollable when rc cannot be polled (not a socket).
func (ip *Poller) Conn(rc syscall.RawConn) Conn {
	if rc == nil || ip == nil {
		return Conn{}
	}
	return Conn{ip: ip, rc: rc}
}

// Pollable reports whether the connection can park.
func (pc *Conn) Pollable() bool { return pc.ip != nil }

// Park arranges for resume to run once the connection is readable or
// closed, and reports whether it did; when it did not, the caller reads
// as usual.
func (pc *Conn) Park(resume func()) bool {
	pc.ip.mu.Lock()
	defer pc.ip.mu.Unlock()
	if pc.noPark {
		return false
	}
	return pc.armLocked(&pc.resume, resume)
}

// await arranges for fn to run once the socket is ready to write (else to read), or the
// registration closes; false when it cannot (the registration is closed, or the kernel
// refused), and fn will not run.
func (pc *Conn) await(write bool, fn func()) bool {
	pc.ip.mu.Lock()
	defer pc.ip.mu.Unlock()
	if write {
		return pc.armLocked(&pc.wwait, fn)
	}
	return pc.armLocked(&pc.rwait, fn)
}

// armLocked sets the callback *slot to fn and asks epoll for what the callbacks set wait
// for, registering pc first if need be.
func (pc *Conn) armLocked(slot *func(), fn func()) bool {
	ip := pc.ip
	if pc.closed || ip.broken {
		return false
	}
	if !pc.registered {
		if ip.loop == nil {
			l, err := startPollLoop(ip)
			if err != nil {
				ip.broken = true
				return false
			}
			ip.loop = l
		}
		ip.registerLocked(pc)
	}
	old := *slot
	*slot = fn
	if !pc.rearmLocked() {
		*slot = old
		return false
	}
	return true
}

// rearmLocked asks epoll to report once what pc's callbacks wait for. Level-triggered and
// one-shot: a socket that is ready already reports at once, and reports once per arming.
func (pc *Conn) rearmLocked() bool {
	var events uint32 = syscall.EPOLLONESHOT
	if pc.resume != nil || pc.rwait != nil {
		events |= syscall.EPOLLIN | syscall.EPOLLRDHUP
	}
	if pc.wwait != nil {
		events |= syscall.EPOLLOUT
	}
	ev := syscall.EpollEvent{Events: events}
	ev.Fd, ev.Pad = eventData(pc.slot, pc.gen)
	epfd := pc.ip.loop.epfd
	var cerr error
	err := pc.rc.Control(func(fd uintptr) {
		op := syscall.EPOLL_CTL_MOD
		if !pc.added {
			op = syscall.EPOLL_CTL_ADD
		}
		cerr = syscall.EpollCtl(epfd, op, int(fd), &ev)
	})
	if err != nil || cerr != nil {
		return false // closed meanwhile: the read fails at once
	}
	pc.added = true
	return true
}

// readyLocked takes the callbacks that events (what epoll reported) serve, and asks epoll
// again for what the others wait for.
func (pc *Conn) readyLocked(events uint32, ready []func()) []func() {
	const failed = syscall.EPOLLHUP | syscall.EPOLLERR
	take := func(slot *func()) {
		if *slot != nil {
			ready = append(ready, *slot)
			*slot = nil
		}
	}
	if events&(syscall.EPOLLIN|syscall.EPOLLRDHUP|failed) != 0 {
		take(&pc.resume)
		take(&pc.rwait)
	}
	if events&(syscall.EPOLLOUT|failed) != 0 {
		take(&pc.wwait)
	}
	if pc.resume != nil || pc.rwait != nil || pc.wwait != nil {
		if !pc.rearmLocked() { // closed meanwhile: run them now, to find it so
			take(&pc.resume)
			take(&pc.rwait)
			take(&pc.wwait)
		}
	}
	return ready
}

// StopParking stops the reader from parking and resumes it if it is parked; a read or a
// write waiting for the socket goes on waiting.
func (pc *Conn) StopParking() {
	pc.ip.mu.Lock()
	pc.noPark = true
	resume := pc.resume
	pc.resume = nil
	pc.ip.mu.Unlock()
	if resume != nil {
		resume()
	}
}

// Close unregisters the connection and runs what waits on it (the parked
// reader resumes, and sees the connection end). It must be called before
// the connection is closed, and may be called more than once.
func (pc *Conn) Close() {
	ip := pc.ip
	ip.mu.Lock()
	if pc.closed {
		ip.mu.Unlock()
		return
	}
	pc.closed, pc.noPark = true, true
	waiting := [...]func(){pc.resume, pc.rwait, pc.wwait}
	pc.resume, pc.rwait, pc.wwait = nil, nil, nil
	var stop *pollLoop
	if pc.registered {
		if pc.added {
			epfd := ip.loop.epfd
			_ = pc.rc.Control(func(fd uintptr) {
				_ = syscall.EpollCtl(epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
			})
		}
		ip.conns[pc.slot] = nil
		ip.free = append(ip.free, pc.slot)
		pc.registered = false
		ip.refs--
		if ip.refs == 0 {
			stop, ip.loop = ip.loop, nil
			ip.conns, ip.free = nil, nil // the next loop starts a table of its own
		}
	}
	ip.mu.Unlock()
	if stop != nil {
		stop.stop()
	}
	for _, fn := range waiting {
		if fn != nil {
			fn()
		}
	}
}

func startPollLoop(ip *Poller) (*pollLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		_ = syscall.Close(epfd)
		return nil, err
	}
	l := &pollLoop{epfd: epfd, wakeR: p[0], wakeW: p[1], done: make(chan struct{})}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, l.wakeR, &ev); err != nil {
		l.closeFDs()
		return nil, err
	}
	go ip.run(l)
	return l, nil
}

// run resumes parked connections as their sockets report, until the loop
// is stopped.
func (ip *Poller) run(l *pollLoop) {
	defer close(l.done)
	events := make([]syscall.EpollEvent, 128)
	var ready []func()
	for {
		n, err := syscall.EpollWait(l.epfd, events, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			ip.fail()
			return
		}
		stop := false
		ip.mu.Lock()
		for _, ev := range events[:n] {
			if ev.Fd == 0 {
				stop = true
				continue
			}
			if pc := ip.lookupLocked(ev.Fd, ev.Pad); pc != nil {
				ready = pc.readyLocked(ev.Events, ready)
			}
		}
		ip.mu.Unlock()
		for i, fn := range ready {
			fn() // starts the reader's goroutine, or wakes a read or a write
			ready[i] = nil
		}
		ready = ready[:0]
		if stop {
			return
		}
	}
}

// fail gives up polling (it does not happen on a working kernel): every
// parked connection resumes and later ones read with a goroutine each.
func (ip *Poller) fail() {
	ip.mu.Lock()
	ip.broken = true
	var ready []func()
	for _, pc := range ip.conns {
		if pc != nil {
			for _, slot := range [...]*func(){&pc.resume, &pc.rwait, &pc.wwait} {
				if *slot != nil {
					ready = append(ready, *slot)
					*slot = nil
				}
			}
		}
	}
	ip.mu.Unlock()
	for _, resume := range ready {
		resume()
	}
}

func (l *pollLoop) stop() {
	_, _ = syscall.Write(l.wakeW, []byte{0})
	<-l.done
	l.closeFDs()
}

func (l *pollLoop) closeFDs() {
	_ = syscall.Close(l.epfd)
	_ = syscall.Close(l.wakeR)
	_ = syscall.Close(l.wakeW)
}
