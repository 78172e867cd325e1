package main

// The status page in a real browser: headless chromium (Debian's chromium package) driven with
// chromedp loads the page of a `projhost run --listen` worker projecting flights-20k, and the
// shards' cursors, states and owners read from the page's DOM are `projhost status --json`'s.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/flightcheck"
	"github.com/projhost/projhost/internal/testwasm"
	"github.com/projhost/projhost/status"
)

// chromiumPath returns the chromium binary, or skips the test saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed, so the status page is not tested in a browser: install it (Debian: apt-get install -y chromium; .ci/run does)")
	return ""
}

// artifactsDir is where tests leave files for people to look at: $PROJHOST_ARTIFACTS, else
// build/artifacts at the repository's root.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PROJHOST_ARTIFACTS")
	if dir == "" {
		var err error
		dir, err = filepath.Abs(filepath.Join("..", "..", "build", "artifacts"))
		require.NoError(t, err)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// pageRow is a shard's row as the browser shows it (textContent of its cells).
type pageRow struct {
	Shard, Owner, Lease, State, Cursor string
	OwnerHasMarkup                     bool // the owner cell holds an element: its text was not escaped
}

// TestStatusPageInBrowser: one shard is paused before the worker starts (its cursor stays
// empty, its state paused), the others are projected to the end; then the page, loaded in
// headless chromium, shows each shard's cursor, state and owner as `status --json` does. The
// worker id carries markup, which the page must show as text. A screenshot is saved.
func TestStatusPageInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	dir := t.TempDir()
	const worker = `w-<b>1</b>&amp;`
	projhost(t, "journal", "create", "--data", dir, "--shards", "4")
	projhost(t, "journal", "append", "--data", dir, "--key-field", "origin", flightcheck.DataPath("flights-20k.json"))
	const pausedShard = "shardId-000000000002"
	projhost(t, "pause", "--data", dir, "--name", "f", "--shard", pausedShard)
	cmd, log, addr := startRun(t, "--data", dir, "--name", "f", "--handler", testwasm.Path(t, testwasm.FlightDelaysAS),
		"--listen", "127.0.0.1:0", "--worker-id", worker, "--lease-duration", "2s")
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()

	// Wait until the projection is at rest: every shard but the paused one caught up, every
	// lease held live by the worker.
	var rows map[string]shardStatus
	deadline := time.Now().Add(3 * time.Minute) // a bound for a loaded machine, not a timing assertion
	for {
		rows = statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "2s")
		rest := len(rows) == 4
		for id, r := range rows {
			rest = rest && r.Owner == worker && r.Lease == status.LeaseLive && (r.LagEvents == 0 || id == pausedShard)
		}
		if rest {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the projection did not come to rest: %+v\nworker log:\n%s", rows, log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Equal(t, status.RunPaused, rows[pausedShard].RunState)
	require.Empty(t, rows[pausedShard].Cursor, "a shard paused before the worker started handles nothing")

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1400, 900))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer cancel()
	bctx, cancel = context.WithTimeout(bctx, 2*time.Minute) // a bound for a loaded machine
	defer cancel()
	url := "http://" + addr + "/"
	// The page's own Watcher judges a lease live once it has seen its counter change (two looks
	// a renewal apart: its samples and its loads), so a page loaded just after the worker came
	// to rest may still say "unknown" for a lease: reload it, as its refresh would, until every
	// lease is judged.
	var got []pageRow
	var title string
	judgeBy := time.Now().Add(time.Minute) // a bound for a loaded machine
	for {
		require.NoError(t, chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`section.projection tr.shard`))),
			"loading %s in chromium (%s)", url, chromium)
		var err error
		title, err = chromedp.Run(bctx, chromedp.Title())
		require.NoError(t, err)
		got, err = chromedp.Run(bctx, chromedp.Evaluate[[]pageRow](`Array.from(document.querySelectorAll('section.projection[data-projection="f"] tr.shard')).map(tr => ({
		Shard: tr.querySelector('td.shard').textContent,
		Owner: tr.querySelector('td.owner').textContent,
		Lease: tr.querySelector('td.lease').textContent,
		State: tr.querySelector('td.state').textContent,
		Cursor: tr.querySelector('td.cursor').textContent,
		OwnerHasMarkup: tr.querySelector('td.owner').children.length > 0,
	}))`))
		require.NoError(t, err, "reading the shards from the page's DOM")
		judged := true
		for _, p := range got {
			judged = judged && strings.TrimSpace(p.Lease) != status.LeaseUnknown
		}
		if judged || time.Now().After(judgeBy) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	chart, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector('section.projection svg.lag-chart') !== null`))
	require.NoError(t, err)
	shot, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // quality 100: a PNG
	require.NoError(t, err, "taking a screenshot")
	shotPath := filepath.Join(artifactsDir(t), "statuspage.png")
	require.NoError(t, os.WriteFile(shotPath, shot, 0o644))
	t.Logf("screenshot of the status page: %s", shotPath)

	// The projection was at rest: status says the same after the page was read.
	after := statusRows(t, "--data", dir, "--name", "f", "--lease-duration", "2s")
	for id, r := range rows {
		require.Equal(t, r.Cursor, after[id].Cursor, "%s: at rest", id)
		require.Equal(t, r.RunState, after[id].RunState, "%s: at rest", id)
	}

	require.Contains(t, title, worker, "the title names the worker, as text")
	require.True(t, chart, "a lag chart")
	require.Len(t, got, 4)
	for _, p := range got {
		r, ok := rows[p.Shard]
		require.True(t, ok, "the page shows shard %q, which status does not", p.Shard)
		want := r.Cursor
		if want == "" {
			want = "-"
		}
		require.Equal(t, want, p.Cursor, "%s: cursor", p.Shard)
		require.Equal(t, r.RunState, p.State, "%s: state", p.Shard)
		require.Equal(t, r.Owner, p.Owner, "%s: owner, shown as text", p.Shard)
		require.False(t, p.OwnerHasMarkup, "%s: the worker id's markup is text, not elements", p.Shard)
		require.Equal(t, status.LeaseLive, strings.TrimSpace(p.Lease), "%s: lease", p.Shard)
	}
}
