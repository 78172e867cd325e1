package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/projhost/projhost/internal/sqlitefile"
	"github.com/projhost/projhost/local"
)

// defaultSQLTimeout is how long `projhost sql` lets a query run by default.
const defaultSQLTimeout = 30 * time.Second

func init() {
	var data string
	var timeout, busy time.Duration
	cmd := &cobra.Command{
		Use:   "sql QUERY",
		Short: "Run a read-only SQL query on the embedded store (read models are in table docs; see `projhost sql --help`)",
		Long: `Runs one read-only SQL query against the embedded store in --data and prints the result as a table.
Read models are rows of table docs(projection, collection, key, doc, shard_id, seq, updated_ms) where doc
is the JSON document; use SQLite's json_extract to reach its fields. Example:

  projhost sql "SELECT key, json_extract(doc,'$.flights') AS flights FROM docs
                WHERE projection='flights' AND collection='airports' ORDER BY flights DESC LIMIT 5"

The store is opened read-only: the query never waits for a worker's write lock and works on a
read-only directory. A query still running after --timeout is interrupted.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReadOnlyQuery(args[0]); err != nil {
				return err
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive (e.g. 30s)")
			}
			if err := checkBusy(busy); err != nil {
				return err
			}
			path, err := filepath.Abs(filepath.Join(data, local.FileName))
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("no embedded store in %s (run a projection first): %w", data, err)
			}
			// Read-only twice over: the file is opened read-only and the connection refuses writes
			// (query_only), so ATTACH of another file cannot write either.
			db, err := sqlitefile.Open(path, busy, true)
			if err != nil {
				return fmt.Errorf("opening %s to read: %w", path, err)
			}
			defer db.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			err = printQuery(ctx, cmd.OutOrStdout(), db, args[0])
			if err != nil && ctx.Err() == context.DeadlineExceeded {
				return fmt.Errorf("query on %s interrupted after --timeout %s (raise it, or narrow the query)", path, timeout)
			}
			if err != nil {
				return fmt.Errorf("query on %s: %w", path, err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&data, "data", defaultDataDir, "data directory")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultSQLTimeout, "interrupt the query after this long")
	busyFlag(cmd, &busy)
	rootCmd.AddCommand(cmd)
}

// printQuery runs q on db and prints its rows as a table.
func printQuery(ctx context.Context, w io.Writer, db *sql.DB, q string) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				cells[i] = "NULL"
			case []byte:
				cells[i] = string(v)
			default:
				cells[i] = fmt.Sprint(v)
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return tw.Flush()
}

// checkReadOnlyQuery accepts one statement (as SQLite's tokenizer splits them:
// sqlitefile.Statements) that starts with SELECT, WITH, VALUES or EXPLAIN: `projhost sql` is
// for reading read models, never for changing the store (which the read-only connection
// refuses anyway).
func checkReadOnlyQuery(q string) error {
	stmts, ok := sqlitefile.Statements(q)
	if !ok {
		return fmt.Errorf("the query holds a NUL byte")
	}
	if len(stmts) > 1 {
		return fmt.Errorf("one SQL statement at a time, please (found %d: the second starts %q)", len(stmts), clip(strings.TrimSpace(stmts[1]), 40))
	}
	t := ""
	if len(stmts) == 1 {
		t = strings.TrimLeft(stripComments(stmts[0]), "( \t\r\n")
	}
	n := 0
	for n < len(t) && (t[n] >= 'a' && t[n] <= 'z' || t[n] >= 'A' && t[n] <= 'Z') {
		n++
	}
	word := strings.ToUpper(t[:n])
	switch word {
	case "SELECT", "WITH", "VALUES", "EXPLAIN":
		return nil
	}
	return fmt.Errorf("projhost sql only runs read-only queries (SELECT, WITH, VALUES, EXPLAIN), not %q", word)
}

// stripComments drops the spaces and comments that start s.
func stripComments(s string) string {
	for {
		s = strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(s, "--"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s, "*/")
			if i < 0 {
				return ""
			}
			s = s[i+2:]
		default:
			return s
		}
	}
}
