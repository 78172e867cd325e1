package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOwnershipVictim(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	o := NewOwnership(4)
	add := func(w, s string, sec float64) {
		o.Add(Handled{Worker: w, Shard: s, Count: 1, First: at(sec), Last: at(sec)})
	}
	add("A", "s0", 1)
	add("A", "s1", 1)
	add("A", "s2", 1)
	require.Equal(t, "", o.Victim(at(10), 5*time.Second, "A", "B"), "s3 has no owner yet")
	add("A", "s3", 2)
	require.Equal(t, "", o.Victim(at(10), 5*time.Second, "A", "B"), "B holds nothing")
	add("B", "s2", 3) // B takes s2 and s3 from A (a steal)
	add("B", "s3", 4)
	add("A", "s0", 5) // more records of a shard whose owner does not change
	require.Equal(t, "", o.Victim(at(8.9), 5*time.Second, "A", "B"), "changed less than 5 s ago")
	require.Equal(t, "A", o.Victim(at(9), 5*time.Second, "A", "B"), "a tie: A")
	add("B", "s1", 10)
	require.Equal(t, "B", o.Victim(at(15), 5*time.Second, "A", "B"), "B holds 3")
	require.Equal(t, []string{"s1", "s2", "s3"}, o.Held("B"))
	require.Equal(t, "s0=A s1=B s2=B s3=B", o.String())
}

func TestTakeover(t *testing.T) {
	kill := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	tk := NewTakeover(kill, "B", []string{"s0", "s1"})
	require.False(t, tk.Done())
	tk.Add(Handled{Worker: "B", Shard: "s0", First: kill.Add(-time.Second), Last: kill}) // before the kill
	tk.Add(Handled{Worker: "A", Shard: "s0", First: kill.Add(time.Second)})              // the killed worker's last lines
	tk.Add(Handled{Worker: "B", Shard: "s2", First: kill.Add(time.Second)})              // a shard B held already
	tk.Add(Handled{Worker: "B", Shard: "s1", First: kill.Add(7 * time.Second)})
	require.False(t, tk.Done())
	require.Equal(t, "1 of 2 shards read again (s0 not yet, s1 after 7.0 s)", tk.String())
	tk.Add(Handled{Worker: "B", Shard: "s0", First: kill.Add(6500 * time.Millisecond)})
	tk.Add(Handled{Worker: "B", Shard: "s0", First: kill.Add(9 * time.Second)}) // later records do not count
	require.True(t, tk.Done())
	require.Equal(t, 7*time.Second, tk.Time())
}

func TestLoadEntries(t *testing.T) {
	es, err := loadEntries("testdata/flights-3.json")
	require.NoError(t, err)
	require.Len(t, es, 3)
	require.Equal(t, []string{"ORD", "ATL", "ORD"}, []string{es[0].key, es[1].key, es[2].key})
	require.JSONEq(t, `{"origin":"ATL","dest":"ORD","arr_delay":-2}`, string(es[1].data))
	_, err = loadEntries("testdata/trace.jsonl")
	require.ErrorContains(t, err, "want a JSON array")
}

func TestMedian(t *testing.T) {
	require.Zero(t, median(nil))
	require.Equal(t, 3.0, median([]float64{5, 3, 1}))
	require.Equal(t, 2.5, median([]float64{4, 1, 2, 3}))
}

func TestFindRoot(t *testing.T) {
	root, err := findRoot(".")
	require.NoError(t, err)
	require.FileExists(t, root+"/tools/kinesis-local/start.sh")
	_, err = findRoot("/")
	require.ErrorContains(t, err, "pass --root")
}
