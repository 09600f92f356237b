package pgstandby

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres means no PostgreSQL installation with initdb, pg_basebackup and postgres was found.
var ErrNoPostgres = errors.New("pgstandby: no PostgreSQL binaries (initdb, pg_basebackup, postgres)")

// Options configure Start. A nil *Options means defaults.
type Options struct {
	// BinDir holds initdb, pg_basebackup and postgres. Default: BinDir().
	BinDir string
	// Durable keeps fsync and full-page writes on, as in production (for benchmarks). By
	// default both are off: a test's data is thrown away, and the standby replays sooner.
	Durable bool
	// Settings are extra "name=value" server settings for both servers.
	Settings []string
}

// Pair is a running primary and a hot standby streaming from it.
type Pair struct {
	Primary *Server
	Standby *Server
	// More are the standbys added by AddStandby.
	More []*Server

	dir      string
	bin      string
	cred     *syscall.Credential
	settings []string
}

// Server is one PostgreSQL server of a Pair, listening on 127.0.0.1:Port, with trust
// authentication for the user "postgres".
type Server struct {
	Port int

	data     string
	args     []string
	bin      string
	cred     *syscall.Credential
	logPath  string
	mu       sync.Mutex
	cmd      *exec.Cmd
	finished chan struct{} // closed when cmd has been waited for
}

// BinDir returns the directory of the PostgreSQL binaries, or "" when none is found.
func BinDir() string {
	if d := os.Getenv("BALLET_PG_BIN"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if hasTools(d) {
			return d
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && hasTools(filepath.Dir(p)) {
		return filepath.Dir(p)
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func hasTools(dir string) bool {
	for _, tool := range []string{"initdb", "pg_basebackup", "postgres"} {
		if _, err := os.Stat(filepath.Join(dir, tool)); err != nil {
			return false
		}
	}
	return true
}

// Start creates a primary with initdb, a standby of it with pg_basebackup -R, starts both and
// waits until the standby accepts connections.
func Start(ctx context.Context, opts *Options) (p *Pair, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BinDir == "" {
		o.BinDir = BinDir()
	}
	if o.BinDir == "" || !hasTools(o.BinDir) {
		return nil, ErrNoPostgres
	}
	p = &Pair{bin: o.BinDir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgstandby: running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	if p.dir, err = os.MkdirTemp("", "ballet-pgstandby-"); err != nil {
		return nil, fmt.Errorf("pgstandby: %w", err)
	}
	defer func() {
		if err != nil {
			_ = p.Close()
			p = nil
		}
	}()
	if p.cred != nil {
		if err := os.Chown(p.dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgstandby: %w", err)
		}
	}
	settings := []string{"listen_addresses=127.0.0.1", "unix_socket_directories=", "max_connections=200",
		"wal_level=replica", "max_wal_senders=10", "hot_standby=on", "wal_receiver_status_interval=1s"}
	if !o.Durable {
		settings = append(settings, "fsync=off", "full_page_writes=off")
	}
	settings = append(settings, o.Settings...)
	p.settings = settings

	primary := filepath.Join(p.dir, "primary")
	if out, err := p.tool(ctx, "initdb", "-D", primary, "-U", "postgres", "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pgstandby: initdb: %w\n%s", err, out)
	}
	if p.Primary, err = p.startServer(ctx, primary, settings); err != nil {
		return nil, err
	}
	if p.Standby, err = p.newStandby(ctx, "standby"); err != nil {
		return nil, err
	}
	return p, nil
}

// AddStandby makes another hot standby of the primary (in More), as behind a pooler in front of
// several.
func (p *Pair) AddStandby(ctx context.Context) (*Server, error) {
	s, err := p.newStandby(ctx, fmt.Sprintf("standby%d", len(p.More)+2))
	if err != nil {
		return nil, err
	}
	p.More = append(p.More, s)
	return s, nil
}

func (p *Pair) newStandby(ctx context.Context, name string) (*Server, error) {
	dir := filepath.Join(p.dir, name)
	if out, err := p.tool(ctx, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(p.Primary.Port), "-U", "postgres",
		"-D", dir, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		return nil, fmt.Errorf("pgstandby: pg_basebackup: %w\n%s", err, out)
	}
	return p.startServer(ctx, dir, p.settings)
}

// tool runs one of the installation's programs as the servers' user.
func (p *Pair) tool(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, name), args...)
	cmd.Dir = p.dir
	cmd.Env = []string{"PATH=" + p.bin + ":/usr/bin:/bin", "LC_ALL=C", "HOME=" + p.dir, "PGCONNECT_TIMEOUT=10"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd.CombinedOutput()
}

// startServer starts postgres on dataDir on a spare port; a port taken meanwhile is retried.
func (p *Pair) startServer(ctx context.Context, dataDir string, settings []string) (*Server, error) {
	var last error
	for range 3 {
		port, err := sparePort()
		if err != nil {
			return nil, err
		}
		s := &Server{Port: port, data: dataDir, bin: p.bin, cred: p.cred,
			logPath: dataDir + ".log"}
		for _, kv := range append(settings, "port="+strconv.Itoa(port)) {
			s.args = append(s.args, "-c", kv)
		}
		if last = s.Start(ctx); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func sparePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgstandby: find a spare port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// URL is the connection string of database db on the server.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Start starts the server (again) and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgstandby: server already running")
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgstandby: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), append([]string{"-D", s.data}, s.args...)...)
	cmd.Env = []string{"LC_ALL=C", "HOME=" + filepath.Dir(s.data)}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Immediate shutdown if this process dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgstandby: start postgres: %w", err)
	}
	s.cmd, s.finished = cmd, make(chan struct{})
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		close(s.finished)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(cctx, s.URL("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		select {
		case werr := <-exited:
			s.cmd = nil
			return fmt.Errorf("pgstandby: postgres on port %d exited (%v):\n%s", s.Port, werr, s.tail())
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			s.stopLocked(syscall.SIGQUIT)
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			s.stopLocked(syscall.SIGQUIT)
			return fmt.Errorf("pgstandby: postgres on port %d did not accept connections in 60s: %v\n%s", s.Port, err, s.tail())
		}
	}
}

// Stop shuts the server down (fast shutdown: open sessions are disconnected) and waits.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked(syscall.SIGINT)
}

func (s *Server) stopLocked(sig syscall.Signal) {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.finished:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.finished:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.finished
		}
	}
	s.cmd = nil
}

// PID is the postmaster's process id, 0 while the server is stopped.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// tail returns the end of the server's log, for error messages.
func (s *Server) tail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Log returns the server's log so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// StopStandby stops the standby (fast shutdown).
func (p *Pair) StopStandby() { p.Standby.Stop() }

// StartStandby starts the stopped standby again on its port; it resumes streaming from where
// it stopped.
func (p *Pair) StartStandby(ctx context.Context) error { return p.Standby.Start(ctx) }

// WaitReplayed waits until the standbys have replayed everything the primary had written when
// it was called.
func (p *Pair) WaitReplayed(ctx context.Context) error {
	pc, err := pgx.Connect(ctx, p.Primary.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgstandby: %w", err)
	}
	defer pc.Close(context.Background())
	var target string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return fmt.Errorf("pgstandby: %w", err)
	}
	for _, s := range append([]*Server{p.Standby}, p.More...) {
		if err := s.waitReplayed(ctx, target); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) waitReplayed(ctx context.Context, target string) error {
	for {
		done, err := s.replayedTo(ctx, target)
		if err == nil && done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pgstandby: the standby on port %d has not replayed %s: %w (last error %v)", s.Port, target, ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (s *Server) replayedTo(ctx context.Context, lsn string) (bool, error) {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return false, err
	}
	defer conn.Close(context.Background())
	var done bool
	err = conn.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&done)
	return done, err
}

// PauseReplay stops the standby from applying WAL (it keeps receiving it): it falls behind
// until ResumeReplay.
func (p *Pair) PauseReplay(ctx context.Context) error { return p.Standby.PauseReplay(ctx) }

// ResumeReplay lets a paused standby apply WAL again.
func (p *Pair) ResumeReplay(ctx context.Context) error { return p.Standby.ResumeReplay(ctx) }

// PauseReplay stops this standby from applying WAL: it falls behind until ResumeReplay.
func (s *Server) PauseReplay(ctx context.Context) error {
	return s.exec(ctx, "SELECT pg_wal_replay_pause()")
}

// ResumeReplay lets this paused standby apply WAL again.
func (s *Server) ResumeReplay(ctx context.Context) error {
	return s.exec(ctx, "SELECT pg_wal_replay_resume()")
}

func (s *Server) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgstandby: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("pgstandby: %s: %w", strings.TrimPrefix(sql, "SELECT "), err)
	}
	return nil
}

// Close stops the servers and removes the directory. Safe to call twice.
func (p *Pair) Close() error {
	for _, s := range p.More {
		s.Stop()
	}
	if p.Standby != nil {
		p.Standby.Stop()
	}
	if p.Primary != nil {
		p.Primary.Stop()
	}
	if p.dir == "" {
		return nil
	}
	err := os.RemoveAll(p.dir)
	p.dir = ""
	return err
}
