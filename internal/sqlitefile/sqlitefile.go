// Package sqlitefile opens the SQLite files of projhost's local journal and embedded store
// (pure-Go driver modernc.org/sqlite) the one way both need: for writing in WAL mode, or for
// reading only.
package sqlitefile

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"modernc.org/libc"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// MaxBusyTimeout is the longest busy timeout ValidateBusyTimeout accepts.
const MaxBusyTimeout = time.Hour

// ValidateBusyTimeout checks a busy timeout: 1 ms to MaxBusyTimeout.
func ValidateBusyTimeout(d time.Duration) error {
	if d < time.Millisecond || d > MaxBusyTimeout {
		return fmt.Errorf("busy timeout %s: use 1ms to %s", d, MaxBusyTimeout)
	}
	return nil
}

// Open opens the database file path with busy as SQLite's busy timeout (whole milliseconds)
// and checks that it can be read.
//
// For writing (readOnly false): WAL mode, synchronous=NORMAL (a committed transaction survives
// a process crash), and BEGIN IMMEDIATE for every transaction (a deferred transaction that
// later writes can fail with SQLITE_BUSY without waiting).
//
// For reading only: mode=ro and query_only, so no write lock is ever taken (WAL readers do not
// wait for writers) and nothing is created. A WAL database in a directory this process cannot
// write, with no -wal file (no process has it open: the last one to close it removes the
// file), cannot be opened that way (SQLITE_READONLY_DIRECTORY: SQLite would create the -shm
// file); it is then opened immutable=1, as a snapshot nobody can change (see "Read-Only WAL
// databases", https://sqlite.org/wal.html#readonly).
//
// Errors: the driver's (*sqlite.Error; IsBusy tells SQLITE_BUSY), unwrapped.
func Open(path string, busy time.Duration, readOnly bool) (*sql.DB, error) {
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(busy.Milliseconds()))
	if readOnly {
		q.Set("mode", "ro")
		q.Set("_query_only", "1")
	} else {
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", "NORMAL")
		q.Set("_txlock", "immediate")
	}
	db, err := open(path, q)
	if readOnly && code(err) == sqlite3.SQLITE_READONLY_DIRECTORY {
		q.Set("immutable", "1")
		db, err = open(path, q)
	}
	return db, err
}

func open(path string, q url.Values) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	var v int
	if err := db.QueryRow("PRAGMA user_version").Scan(&v); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// code is err's extended SQLite result code, 0 when err is not a SQLite error.
func code(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// IsBusy reports whether err is (or wraps) SQLITE_BUSY: the file stayed locked by another
// connection for longer than the busy timeout.
func IsBusy(err error) bool { return code(err)&0xff == sqlite3.SQLITE_BUSY }

// IsError reports whether err is (or wraps) SQLite's generic SQLITE_ERROR (a missing table,
// for example).
func IsError(err error) bool { return code(err)&0xff == sqlite3.SQLITE_ERROR }

// Statements splits q into its SQL statements the way SQLite's tokenizer does
// (sqlite3_complete, https://sqlite.org/c3ref/complete.html): a ';' ends a statement only
// outside string literals, quoted identifiers, comments and trigger bodies. Pieces holding
// nothing but spaces and comments are dropped; each statement keeps its ';'. A NUL byte ends
// the text for SQLite, so q must hold none (ok is false then).
func Statements(q string) (stmts []string, ok bool) {
	if strings.IndexByte(q, 0) >= 0 {
		return nil, false
	}
	tls := libc.NewTLS()
	defer tls.Close()
	start := 0
	for i := 0; i < len(q); i++ {
		if q[i] != ';' || !complete(tls, q[start:i+1]) {
			continue
		}
		if hasContent(tls, q[start:i]) {
			stmts = append(stmts, q[start:i+1])
		}
		start = i + 1
	}
	if hasContent(tls, q[start:]) {
		stmts = append(stmts, q[start:])
	}
	return stmts, true
}

// hasContent reports whether p (no ';' ending a statement in it) holds a token that is not a
// space or a comment: after a complete statement, SQLite sees the text as complete only if p
// adds nothing (the newline ends a "--" comment, which sqlite3_complete wants ended).
func hasContent(tls *libc.TLS, p string) bool { return !complete(tls, "SELECT 1;"+p+"\n") }

func complete(tls *libc.TLS, s string) bool {
	p, err := libc.CString(s)
	if err != nil {
		panic(err) // out of C memory
	}
	defer libc.Xfree(tls, p)
	return sqlite3.Xsqlite3_complete(tls, p) != 0
}
