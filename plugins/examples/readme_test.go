package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
)

// TestREADMEGoHandlerOutsideRepo follows the README's "Building a Go handler outside this
// repository" as a new user would: its shell blocks run with bash in a fresh directory outside
// the repository, with $HOME/projhost pointing at this checkout, `projhost` on PATH, the user's
// Go caches but no GOFLAGS and no network, and main.go written from its Go block. The read model
// `projhost test` prints must be the one the README shows, for the standard Go build and, when
// TinyGo is installed (make tinygo; required under CI=true), for the TinyGo build too; the
// handler's module graph must hold the SDK only.
func TestREADMEGoHandlerOutsideRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds projhost and a handler (-short)")
	}
	root := testwasm.RepoRoot(t)
	blocks := readmeBlocks(t, root, "Building a Go handler outside this repository", "\n**One rule", "sh", "go", "sh")
	setup, mainGo, build := blocks[0], blocks[1], blocks[2]
	want := shownReadModel(t, build)

	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	home, bin := newUser(t, root)
	work := t.TempDir()
	path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
	tinygo := testwasm.TinyGoInstalled(t)
	if tinygo {
		path = filepath.Join(root, testwasm.TinyGoDir, "bin") + string(os.PathListSeparator) + path
	} else {
		if os.Getenv("CI") == "true" {
			t.Fatalf("TinyGo is not installed in %s: run make tinygo (.ci/run does)", testwasm.TinyGoDir)
		}
		t.Logf("TinyGo is not installed in %s (make tinygo): the TinyGo build is left out", testwasm.TinyGoDir)
		build = regexp.MustCompile(`(?m)^tinygo .*$`).ReplaceAllString(build, "")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + home, "PATH=" + path, "GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"),
		"GOPATH=" + goEnv("GOPATH"), "XDG_CACHE_HOME=" + cache, "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=",
	}
	run := func(script string) string {
		t.Helper()
		out, err := runScript(work, env, script)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	run(setup)
	work = filepath.Join(work, "totals") // the setup block made it and went into it
	if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(mainGo), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(run(build)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("projhost test printed\n%s\nthe README shows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tinygo {
		got := strings.Fields(run("projhost test --handler totals-tinygo.wasm --events events.ndjson --key-field account"))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("TinyGo build: projhost test printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if mods := strings.Fields(run("go list -m all")); strings.Join(mods, " ") != "example.com/totals github.com/projhost/projhost/sdk/go v0.0.0 => "+filepath.Join(home, "projhost", "sdk", "go") {
		t.Fatalf("go list -m all = %q: want the handler and the SDK only", mods)
	}
}
