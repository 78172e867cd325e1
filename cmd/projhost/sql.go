package main

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/projhost/projhost/local"
)

func init() {
	var data string
	cmd := &cobra.Command{
		Use:   "sql QUERY",
		Short: "Run a read-only SQL query on the embedded store (read models are in table docs; see `projhost sql --help`)",
		Long: `Runs one read-only SQL query against the embedded store in --data and prints the result as a table.
Read models are rows of table docs(projection, collection, key, doc, shard_id, seq, updated_ms) where doc
is the JSON document; use SQLite's json_extract to reach its fields. Example:

  projhost sql "SELECT key, json_extract(doc,'$.flights') AS flights FROM docs
                WHERE projection='flights' AND collection='airports' ORDER BY flights DESC LIMIT 5"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReadOnlyQuery(args[0]); err != nil {
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
			dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)"
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				return err
			}
			defer db.Close()
			rows, err := db.QueryContext(cmd.Context(), args[0])
			if err != nil {
				return fmt.Errorf("query on %s: %w", path, err)
			}
			defer rows.Close()
			cols, err := rows.Columns()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
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
		},
	}
	cmd.Flags().StringVar(&data, "data", defaultDataDir, "data directory")
	rootCmd.AddCommand(cmd)
}

// checkReadOnlyQuery accepts one statement that starts with SELECT, WITH, VALUES or EXPLAIN:
// `projhost sql` is for reading read models, never for changing the store.
func checkReadOnlyQuery(q string) error {
	t := strings.TrimSpace(q)
	t = strings.TrimSuffix(t, ";")
	if strings.Contains(t, ";") {
		return fmt.Errorf("one SQL statement at a time, please (found ';' inside the query)")
	}
	t = strings.TrimLeft(t, "( \t\r\n")
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
