package dynamo_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/projhost/projhost/internal/faultproxy"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/registry/registrytest"
	"github.com/projhost/projhost/store/dynamo"
)

func TestRegistryConformance(t *testing.T) {
	e := newEnv(t)
	s := open(t, e, dynamo.NewRegistry)
	registrytest.RunStore(t, func(t *testing.T) registry.Store { return s })
}

// TestRegistryAmbiguous: an Add or an Activate whose write is applied and whose answer is lost
// (500 after apply, the connection dropped, or held past the attempt timeout) succeeds once:
// the SDK's retry meets its own item, which carries this call's request token. An Activate
// that meets another deploy's pointer between its applied attempt and the retry is not
// possible (the pointer holds its token); one whose attempt meets a genuine conflict reports it.
func TestRegistryAmbiguous(t *testing.T) {
	for _, kind := range []faultproxy.Kind{faultproxy.ApplyThen500, faultproxy.ApplyThenDrop, faultproxy.DelayThenApply} {
		t.Run(kind.String(), func(t *testing.T) {
			fe, s, direct := openBoth(t, dynamo.NewRegistry)
			proj := "amb-" + kind.String()
			v := registry.Version{Projection: proj, SHA256: registry.Sum([]byte(proj)), Size: 10, ABI: 1, UploadedMs: time.Now().UnixMilli()}
			fe.armOp(kind, "PutItem", fe.names.Modules, `"v#`)
			got, err := s.Add(ctxT(t), v)
			if err != nil {
				t.Fatalf("Add with its answer lost: %v", err)
			}
			fe.requireFaulted(t)
			if got.Number != 1 {
				t.Fatalf("Add numbered %d, want 1", got.Number)
			}
			if vs, err := direct.Versions(ctxT(t), proj); err != nil || len(vs) != 1 {
				t.Fatalf("versions stored after one Add: %+v, %v; want one", vs, err)
			}
			fe.armOp(kind, "PutItem", fe.names.Modules, `"active"`)
			a, err := s.Activate(ctxT(t), proj, 1, 0)
			if err != nil {
				t.Fatalf("Activate with its answer lost: %v", err)
			}
			fe.requireFaulted(t)
			if a.Version != 1 || a.Counter != 1 {
				t.Fatalf("Activate returned %+v", a)
			}
			if stored, err := direct.Active(ctxT(t), proj); err != nil || stored != a {
				t.Fatalf("pointer stored %+v, %v; want %+v", stored, err, a)
			}
			// A second version; another deploy activates it after this call read the
			// pointer and before its write arrives: the faulted attempt meets the conflict
			// (the server refuses it), the client learns nothing from it, and the retry's
			// conflict is reported with the other deploy's pointer.
			if _, err := direct.Add(ctxT(t), registry.Version{Projection: proj, SHA256: v.SHA256, Size: 10, ABI: 1}); err != nil {
				t.Fatal(err)
			}
			fe.armed = len(fe.proxy.Faults())
			var once sync.Once
			fe.proxy.SetRule(faultproxy.Rule{Kind: kind, Limit: 1, Delay: faultDelay, Match: func(r faultproxy.Request) bool {
				if r.Op != "PutItem" || r.Table != fe.names.Modules || !strings.Contains(string(r.Body), `"active"`) {
					return false
				}
				once.Do(func() {
					if _, err := direct.Activate(context.Background(), proj, 2, 1); err != nil {
						t.Errorf("the other deploy's Activate: %v", err)
					}
				})
				return true
			}})
			_, err = s.Activate(ctxT(t), proj, 1, 1)
			fe.requireFaultedConflict(t)
			var ce *registry.ConflictError
			if !errors.As(err, &ce) || ce.Stored.Version != 2 || ce.Stored.Counter != 2 {
				t.Fatalf("Activate from a stale counter = %v, want a *ConflictError with version 2 at counter 2", err)
			}
		})
	}
}
