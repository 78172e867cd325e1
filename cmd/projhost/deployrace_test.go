package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotest"
	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/s3test"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/local"
	"github.com/projhost/projhost/registry"
)

// TestDeployRaceProcesses (issue 11): four `projhost deploy --activate` processes of four
// different modules, started at once against one store, over a 4-shard journal of flights-2k
// with a smoke run of 500 events a shard. Whatever the interleaving: every process exits 0
// (activated) or 1 with the one documented line "version N is stored but not active: ...";
// the versions are 1-4; the activations form one chain (each "was" the one before, the first
// from none) ending at the active version; `handlers list --json` shows the 4 versions with
// exactly that one active.
//
// Each process is held, once it has read the active version and validated, until all four have:
// on the embedded store the test holds projhost.db's write lock (as a paused process would)
// until each module is in the module store (a deploy puts it there after validating; its
// version's record then waits for the lock, --busy-timeout 1h); on DynamoDB with an S3 module
// store (dynalite, s3rver) the module store is reached through an HTTP proxy that holds the
// module uploads (PUT) until all four arrived. So they race every time, and exactly one
// activates. PROJHOST_DEPLOY_RACE_NATURAL=1 holds nothing: the processes race as they happen
// to (the smoke run makes validation take a while), the test logs whether they did, and
// requires only a consistent outcome (a process that saw another's activation activates after
// it: still one chain).
func TestDeployRaceProcesses(t *testing.T) {
	for _, backend := range []string{"embedded", "dynamodb+s3"} {
		t.Run(backend, func(t *testing.T) { testDeployRaceProcesses(t, backend) })
	}
}

func testDeployRaceProcesses(t *testing.T, backend string) {
	dir := t.TempDir()
	projhost(t, "journal", "create", "--data", dir, "--shards", "4")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-2k.json"))
	natural := os.Getenv("PROJHOST_DEPLOY_RACE_NATURAL") == "1"
	st := []string{"--data", dir}
	var ms []string
	release := func() {}
	if backend == "dynamodb+s3" {
		_, prefix := dynamotest.Tables(t)
		st = append(st, "--store", "dynamodb", "--dynamodb-endpoint", dynamotest.Endpoint(t), "--table-prefix", prefix)
		ep := s3test.Endpoint(t)
		if !natural {
			ep = holdPuts(t, ep, 4)
		}
		ms = []string{"--module-store", "s3://" + s3test.Bucket(t, s3test.Client(t)) + "/modules", "--s3-endpoint", ep}
	} else if !natural {
		s, err := local.Open(dir) // the store at the current schema: opening it takes no lock
		require.NoError(t, err)
		require.NoError(t, s.Close())
		release = writeLock(t, filepath.Join(dir, local.FileName))
		t.Cleanup(release)
		st = append(st, "--busy-timeout", "1h")
	}

	mods := []string{testwasm.CountGo, testwasm.FlightDelaysGo, testwasm.CountAS, testwasm.FlightDelaysAS}
	sums := map[string]string{} // sha256 -> module
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type proc struct {
		cmd            *exec.Cmd
		stdout, stderr bytes.Buffer
		done           chan error
	}
	procs := make([]*proc, len(mods))
	paths := make([]string, len(mods))
	for i, m := range mods {
		paths[i] = testwasm.Path(t, m)
		b, err := os.ReadFile(paths[i])
		require.NoError(t, err)
		sums[registry.Sum(b)] = m
	}
	start := time.Now()
	for i := range mods {
		p := &proc{done: make(chan error, 1)}
		args := append(append([]string{"deploy", "--name", "p", "--handler", paths[i], "--note", "racer " + strconv.Itoa(i),
			"--smoke-events", "500", "--activate"}, st...), ms...)
		p.cmd = exec.CommandContext(ctx, binPath, args...)
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
		require.NoError(t, p.cmd.Start())
		go func() { p.done <- p.cmd.Wait() }()
		procs[i] = p
	}
	if backend == "embedded" && !natural {
		// Every module in the module store: every process read the pointer and validated.
		for {
			n := 0
			for sum := range sums {
				if _, err := os.Stat(filepath.Join(dir, "modules", sum+".wasm")); err == nil {
					n++
				}
			}
			if n == len(sums) {
				break
			}
			for i, p := range procs {
				select {
				case err := <-p.done:
					t.Fatalf("deploy %d ended (%v) while the store was locked:\n%s%s", i, err, p.stdout.String(), p.stderr.String())
				default:
				}
			}
			require.NoError(t, ctx.Err(), "the modules did not all reach the module store")
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("all 4 validated and waiting for the store after %s: releasing its lock", time.Since(start).Round(time.Millisecond))
		release()
	}

	stored := regexp.MustCompile(`(?m)^stored version (\d+) of p$`)
	activated := regexp.MustCompile(`(?m)^version (\d+) of p is active \(was (none|version (\d+))\)$`)
	chain := map[int64]int64{} // was -> version, of the processes that activated
	var versions []int64
	lost := 0
	for i, p := range procs {
		err := <-p.done
		out, msg := p.stdout.String(), strings.TrimSpace(p.stderr.String())
		m := stored.FindStringSubmatch(out)
		require.NotNil(t, m, "deploy %d stored no version: %v\n%s%s", i, err, out, msg)
		v, _ := strconv.ParseInt(m[1], 10, 64)
		versions = append(versions, v)
		if err == nil {
			a := activated.FindStringSubmatch(out)
			require.NotNil(t, a, "deploy %d exited 0 without activating:\n%s", i, out)
			require.Equal(t, m[1], a[1])
			was, _ := strconv.ParseInt(a[3], 10, 64) // 0 for none
			_, dup := chain[was]
			require.False(t, dup, "two deploys activated over the same version %d", was)
			chain[was] = v
			continue
		}
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "deploy %d: %v", i, err)
		require.Equal(t, 1, ee.ExitCode(), "deploy %d: %s", i, msg)
		require.NotContains(t, msg, "\n", "deploy %d: one line", i)
		require.Regexp(t, fmt.Sprintf(`^projhost: version %d is stored but not active: .*registry: the active version of p changed meanwhile `+
			`\(now version \d+, change \d+\): list the versions and activate again$`, v), msg, "deploy %d", i)
		require.NotContains(t, out, "is active", "deploy %d", i)
		lost++
	}
	require.ElementsMatch(t, []int64{1, 2, 3, 4}, versions)
	// One chain from none through every activation.
	active, seen := int64(0), 0
	for next, ok := chain[0]; ok; next, ok = chain[active] {
		active = next
		seen++
	}
	require.Equal(t, len(chain), seen, "the activations form one chain from none: %v", chain)
	require.NotZero(t, active, "no deploy activated")

	lines := strings.Split(strings.TrimSpace(projhost(t, append([]string{"handlers", "list", "--name", "p", "--json"}, st...)...)), "\n")
	require.Len(t, lines, 4)
	var actives []int64
	notes := map[string]bool{}
	for _, l := range lines {
		var r registry.VersionJSON
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		require.Contains(t, sums, r.SHA256)
		notes[r.Note] = true
		if r.Active {
			actives = append(actives, r.Version)
		}
	}
	require.Len(t, notes, 4)
	require.Equal(t, []int64{active}, actives, "exactly one version active: the chain's last")

	if len(chain) == 1 {
		t.Logf("%s: raced: all 4 read the active version before any activated; version %d activated, %d stored but not active (%s)",
			backend, active, lost, time.Since(start).Round(time.Millisecond))
	} else {
		t.Logf("%s: did NOT race fully: %d deploys activated one after another (was -> version: %v), %d stored but not active; the outcome is consistent (%s)",
			backend, len(chain), chain, lost, time.Since(start).Round(time.Millisecond))
	}
	if !natural {
		require.Len(t, chain, 1, "held until all had validated, exactly one activates")
	}
}

// holdPuts returns the URL of an HTTP proxy to target that holds every PUT request until n of
// them arrived, then lets them all through (and every later request).
func holdPuts(t *testing.T, target string, n int) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	puts, all := 0, make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			mu.Lock()
			if puts++; puts == n {
				t.Logf("%d module uploads held: letting them through", n)
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
