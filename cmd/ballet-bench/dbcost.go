package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// dbCost is what the database server of --db spent: the CPU of the PostgreSQL processes
// (--db-pid, the postmaster, on this machine) and its transactions (pg_stat_database).
type dbCost struct {
	ticks int64 // clock ticks of user and system time
	xacts int64 // committed and rolled-back transactions of the database
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// statsFlush is how long PostgreSQL may keep a session's counts before they show in
// pg_stat_database (PGSTAT_IDLE_INTERVAL, 10 s, for a session that went idle).
const statsFlush = 11 * time.Second

// readDBCost reads the counters; pid 0 skips the CPU.
func readDBCost(ctx context.Context, pool *pgxpool.Pool, pid int) (dbCost, error) {
	var c dbCost
	if err := pool.QueryRow(ctx, `SELECT xact_commit + xact_rollback FROM pg_stat_database
		WHERE datname = current_database()`).Scan(&c.xacts); err != nil {
		return c, fmt.Errorf("pg_stat_database: %w", err)
	}
	if pid == 0 {
		return c, nil
	}
	ticks, err := treeTicks(pid)
	if err != nil {
		return c, err
	}
	c.ticks = ticks
	return c, nil
}

// treeTicks sums the CPU of process pid and its children: their own time, and that of their
// children already reaped (so a backend that ended during the run still counts, through the
// postmaster).
func treeTicks(pid int) (int64, error) {
	own, _, err := statTicks(strconv.Itoa(pid))
	if err != nil {
		return 0, fmt.Errorf("--db-pid %d: %w", pid, err)
	}
	total := own
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		ticks, ppid, err := statTicks(filepath.Base(d))
		if err == nil && ppid == pid {
			total += ticks
		}
	}
	return total, nil
}

// statTicks reads utime+stime+cutime+cstime and the parent pid from /proc/PID/stat.
func statTicks(pid string) (ticks int64, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseStat(string(b))
}

func parseStat(s string) (ticks int64, ppid int, err error) {
	// The command name is in parentheses and may hold spaces: fields start after the last ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed stat %q", s)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); ppid is field 4, utime..cstime are fields 14..17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("malformed stat %q", s)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	for _, x := range f[11:15] {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		ticks += n
	}
	return ticks, ppid, nil
}

// addDBCost reports the difference of two readings against the run's transactions.
func addDBCost(r *report, before, after dbCost, txs int64, pid int) {
	extra := after.xacts - before.xacts - txs
	r.add("db_transactions", after.xacts-before.xacts, "")
	if txs > 0 {
		r.add("db_other_transactions_per_commit", float64(extra)/float64(txs), "")
	}
	if pid != 0 {
		r.add("db_cpu_ms", (after.ticks-before.ticks)*1000/clockTicks, "ms")
		if txs > 0 {
			r.add("db_cpu_ms_per_commit", float64(after.ticks-before.ticks)*1000/clockTicks/float64(txs), "ms")
		}
	}
}
