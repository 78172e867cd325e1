package memlease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/projhost/projhost/shardmap"
	"github.com/projhost/projhost/shardmap/leasetest"
	"github.com/projhost/projhost/shardmap/memlease"
)

func TestConformance(t *testing.T) {
	shared := memlease.New()
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return shared })
}

func TestConformanceFreshStore(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) shardmap.LeaseStore { return memlease.New() })
}

func TestCopiesAreIndependent(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	parents := []string{"p0", "p1"}
	if err := s.Create(ctx, shardmap.Lease{Projection: "p", ShardID: "s", ParentIDs: parents, State: shardmap.StateActive}); err != nil {
		t.Fatal(err)
	}
	parents[0] = "changed"
	ls, err := s.List(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if got := ls[0].ParentIDs[0]; got != "p0" {
		t.Fatalf("stored parent changed through caller's slice: %q", got)
	}
	ls[0].ParentIDs[1] = "changed"
	ls2, _ := s.List(ctx, "p")
	if got := ls2[0].ParentIDs[1]; got != "p1" {
		t.Fatalf("stored parent changed through listed slice: %q", got)
	}
}

func TestInvalidLease(t *testing.T) {
	ctx := context.Background()
	s := memlease.New()
	for _, l := range []shardmap.Lease{{ShardID: "s"}, {Projection: "p"}} {
		if err := s.Create(ctx, l); !errors.Is(err, memlease.ErrInvalidLease) {
			t.Errorf("Create(%+v) = %v, want ErrInvalidLease", l, err)
		}
		if _, err := s.Update(ctx, l); !errors.Is(err, memlease.ErrInvalidLease) {
			t.Errorf("Update(%+v) = %v, want ErrInvalidLease", l, err)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := memlease.New()
	if _, err := s.List(ctx, "p"); !errors.Is(err, context.Canceled) {
		t.Fatalf("List on canceled ctx = %v", err)
	}
	if err := s.Create(ctx, shardmap.Lease{Projection: "p", ShardID: "s"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Create on canceled ctx = %v", err)
	}
}
