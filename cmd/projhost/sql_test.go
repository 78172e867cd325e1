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
