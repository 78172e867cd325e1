package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckReadOnlyQuery(t *testing.T) {
	cases := []struct {
		q   string
		err string
	}{
		{"SELECT 1", ""},
		{"  select key from docs;  ", ""},
		{"WITH x AS (SELECT 1) SELECT * FROM x", ""},
		{"(SELECT 1)", ""},
		{"VALUES(1)", ""},
		{"ATTACH DATABASE 'x.db' AS w", `not "ATTACH"`},
		{"DELETE FROM docs", `not "DELETE"`},
		{"VACUUM INTO '/tmp/x.db'", `not "VACUUM"`},
		{"SELECT 1; DELETE FROM docs", "one SQL statement"},
		{"SELECT 'a;b'", ""},
		{`SELECT key FROM docs WHERE doc LIKE '%;%' -- a; comment`, ""},
		{"SELECT 1; -- only a comment after", ""},
		{"-- a comment first\nSELECT 1", ""},
		{"/* c */ SELECT 1", ""},
		{"SELECT 'a;b'; SELECT 2", "found 2"},
		{"-- DELETE FROM docs", `not ""`},
		{"SELECT 1\x00", "NUL"},
		{"", `not ""`},
	}
	for _, c := range cases {
		err := checkReadOnlyQuery(c.q)
		if c.err == "" {
			require.NoError(t, err, c.q)
		} else {
			require.ErrorContains(t, err, c.err, c.q)
		}
	}
}
