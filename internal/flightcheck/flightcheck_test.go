package flightcheck

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/readmodel"
)

func TestExpectedSmall(t *testing.T) {
	fs := []Flight{
		{Delay: 66, Distance: 1750, Origin: "DTW", Destination: "LAS"},
		{Delay: -5, Distance: 1750, Origin: "DTW", Destination: "LAS"},
		{Delay: 10, Distance: 500, Origin: "DTW", Destination: "ORD"},
		{Delay: -20, Distance: 100, Origin: "SFO", Destination: "LAX"},
	}
	want := map[string]map[string]int64{
		"airports/DTW":   {"flights": 3, "delayed": 1, "total_delay": 71, "max_delay": 66},
		"airports/SFO":   {"flights": 1, "delayed": 0, "total_delay": -20, "max_delay": -20},
		"routes/DTW-LAS": {"flights": 2, "total_distance": 3500},
		"routes/DTW-ORD": {"flights": 1, "total_distance": 500},
		"routes/SFO-LAX": {"flights": 1, "total_distance": 100},
	}
	require.Equal(t, want, Expected(fs))
}

func TestDiffAndDecode(t *testing.T) {
	got, err := Decode([]readmodel.Doc{{Collection: "routes", Key: "A-B", Doc: []byte(`{"flights":2,"total_distance":7}`)}})
	require.NoError(t, err)
	want := map[string]map[string]int64{"routes/A-B": {"flights": 1, "total_distance": 7}, "routes/B-C": {"flights": 1, "total_distance": 1}}
	require.Equal(t, []string{
		"routes/A-B: got map[flights:2 total_distance:7], want map[flights:1 total_distance:7]",
		"routes/B-C: missing, want map[flights:1 total_distance:1]",
	}, Diff(want, got, 10))
	_, err = Decode([]readmodel.Doc{{Collection: "x", Key: "y", Doc: []byte(`{"a":"s"}`)}})
	require.Error(t, err)
}

func TestLoad20k(t *testing.T) {
	fs := Load(t, DataPath("flights-20k.json"))
	require.Len(t, fs, 20000)
	exp := Expected(fs)
	var flights int64
	airports := 0
	for k, v := range exp {
		if k[:9] == "airports/" {
			flights += v["flights"]
			airports++
		}
	}
	require.EqualValues(t, 20000, flights)
	require.Equal(t, 220, airports) // ../shared/data/README.md: 220 origin airports
}
