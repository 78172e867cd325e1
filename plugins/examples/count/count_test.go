package count_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/projhost/projhost/plugins/examples/count"
	"github.com/projhost/projhost/sdk/go/guest"
)

func TestCounts(t *testing.T) {
	keys := strings.Fields("a b a c a b d a")
	want := map[string]int{}
	var evs []guest.Event
	for i, k := range keys {
		want[k]++
		evs = append(evs, guest.Event{Seq: []byte(fmt.Sprint(i + 1)), PartitionKey: []byte(k)})
	}
	for _, batch := range []int{1, 3, len(keys)} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			n := guest.NewNative(count.Handler)
			n.Set(count.Collection, "d", []byte(`{"count":10}`))
			for i := 0; i < len(evs); i += batch {
				if _, err := n.Run("s", evs[i:min(i+batch, len(evs))]); err != nil {
					t.Fatal(err)
				}
			}
			got := n.Collection(count.Collection)
			if len(got) != len(want) {
				t.Fatalf("%d documents, want %d", len(got), len(want))
			}
			for k, c := range want {
				if k == "d" {
					c += 10
				}
				if w := fmt.Sprintf(`{"count":%d}`, c); string(got[k]) != w {
					t.Errorf("counts/%s = %s, want %s", k, got[k], w)
				}
			}
		})
	}
}

func TestCountFailures(t *testing.T) {
	tests := []struct {
		name, stored, key, want string
	}{
		{"empty partition key", "", "", "event seq 7 has an empty partition key"},
		{"corrupt stored document", `{"count":"x"}`, "k", `stored document counts/k does not decode: no integer "count"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := guest.NewNative(count.Handler)
			if tt.stored != "" {
				n.Set(count.Collection, tt.key, []byte(tt.stored))
			}
			_, err := n.Run("s", []guest.Event{{Seq: []byte("7"), PartitionKey: []byte(tt.key)}})
			if !errors.Is(err, guest.ErrHandlerFailed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want ErrHandlerFailed with %q", err, tt.want)
			}
		})
	}
}
