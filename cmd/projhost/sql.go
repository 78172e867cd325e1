package main

import (
	"database/sql"
	"fmt"
	"net/url"
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
			path, err := filepath.Abs(filepath.Join(data, local.FileName))
			if err != nil {
				return err
			}
			dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)"
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
