package sqlitefile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestStatements(t *testing.T) {
	cases := []struct {
		q    string
		want []string
	}{
		{"SELECT 1", []string{"SELECT 1"}},
		{"SELECT 1;", []string{"SELECT 1;"}},
		{"SELECT 'a;b'", []string{"SELECT 'a;b'"}},
		{`SELECT "a;b" FROM docs;`, []string{`SELECT "a;b" FROM docs;`}},
		{"SELECT [x;y] FROM t", []string{"SELECT [x;y] FROM t"}},
		{"SELECT 1 -- a; comment\n", []string{"SELECT 1 -- a; comment\n"}},
		{"SELECT /* ; */ 1", []string{"SELECT /* ; */ 1"}},
		{"SELECT 1; -- trailing comment", []string{"SELECT 1;"}},
		{"SELECT 1; /* c */ ;  ", []string{"SELECT 1;"}},
		{"SELECT 1; DELETE FROM docs", []string{"SELECT 1;", " DELETE FROM docs"}},
		{"SELECT 'it''s;'; SELECT 2;", []string{"SELECT 'it''s;';", " SELECT 2;"}},
		{"", nil},
		{"  -- only a comment", nil},
		{"CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; SELECT 2; END; SELECT 3",
			[]string{"CREATE TRIGGER t AFTER INSERT ON x BEGIN SELECT 1; SELECT 2; END;", " SELECT 3"}},
	}
	for _, c := range cases {
		got, ok := Statements(c.q)
		require.True(t, ok, c.q)
		require.Equal(t, c.want, got, c.q)
	}
	_, ok := Statements("SELECT 1\x00; DELETE FROM docs")
	require.False(t, ok, "a NUL byte")
}

func TestValidateBusyTimeout(t *testing.T) {
	for _, d := range []int64{-1, 0, 999_999, int64(MaxBusyTimeout) + 1} {
		require.Error(t, ValidateBusyTimeout(time.Duration(d)), d)
	}
	for _, d := range []int64{1_000_000, int64(MaxBusyTimeout)} {
		require.NoError(t, ValidateBusyTimeout(time.Duration(d)), d)
	}
}
