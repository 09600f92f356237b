// Package pgstandby runs a throwaway PostgreSQL primary and a hot standby that streams from it,
// for tests and benchmarks: initdb, pg_basebackup -R and postgres from a PostgreSQL
// installation's bin directory, on spare loopback ports, in a temporary directory.
//
// Start returns a running Pair; Close stops both servers and removes the directory.
// StopStandby and StartStandby restart the standby in place (its WAL position survives), and
// PauseReplay/ResumeReplay hold the standby's replay back to make it lag on purpose.
//
// PostgreSQL refuses to run as root: when the process is root, the servers and their tools run
// as the "postgres" user, which owns the directory. The servers are asked to stop (immediate
// shutdown) when the process that started them dies, so a crashed test leaves no server behind.
//
// BinDir finds the binaries: $BALLET_PG_BIN, else the newest /usr/lib/postgresql/*/bin, else
// the directory of pg_ctl on $PATH.
package pgstandby
