package projection_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/projection"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"flights", ""},
		{"flights v2.ORD-JFK_β", ""},
		{strings.Repeat("n", projection.MaxNameBytes), ""},
		{"", "projection name is required"},
		{strings.Repeat("n", projection.MaxNameBytes+1), "projection name of 256 bytes: at most 255"},
		{"a\nb", `projection name "a\nb" holds a control character`},
		{"a\x00", "holds a control character"},
		{"a\xffb", "is not UTF-8"},
	} {
		err := projection.CheckName(tc.name)
		if tc.want == "" {
			require.NoError(t, err, "%q", tc.name)
			continue
		}
		require.ErrorIs(t, err, projection.ErrConfig)
		require.ErrorContains(t, err, tc.want)
	}
}
