package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/projhost/projhost/internal/testwasm"
)

// TestREADMEAssemblyScriptHandlerOutsideRepo follows the README's "Building an AssemblyScript
// handler outside this repository" as a new user would: its shell blocks run with bash in a
// fresh directory outside the repository, with $HOME/projhost pointing at this checkout and
// `projhost` on PATH, and index.ts written from its TypeScript block. npm installs the compiler
// from the registry, or from the user's npm cache when it holds it (prefer-offline; `npm ci` in
// the checkout fills it). The read model `projhost test` prints must be the one the README
// shows. Without network and cache it is skipped (it fails under CI=true).
func TestREADMEAssemblyScriptHandlerOutsideRepo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds projhost and installs npm packages (-short)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed")
	}
	root := testwasm.RepoRoot(t)
	blocks := readmeBlocks(t, root, "Building an AssemblyScript handler outside this repository", "", "sh", "ts", "sh")
	setup, indexTS, build := blocks[0], blocks[1], blocks[2]
	want := shownReadModel(t, build)

	npmCache, err := exec.Command("npm", "config", "get", "cache").Output()
	if err != nil {
		t.Fatalf("npm config get cache: %v", err)
	}
	home, bin := newUser(t, root)
	work := t.TempDir()
	env := []string{
		"HOME=" + home, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"npm_config_cache=" + strings.TrimSpace(string(npmCache)), "npm_config_prefer_offline=true",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false",
	}
	run := func(script string) (string, error) { return runScript(work, env, script) }

	if _, err := run(setup); err != nil {
		offline := strings.Contains(err.Error(), "ENOTCACHED") || strings.Contains(err.Error(), "EAI_AGAIN") || strings.Contains(err.Error(), "ENOTFOUND")
		if offline && os.Getenv("CI") != "true" {
			t.Skipf("npm could not install the packages (no network, and not in the npm cache): %v", err)
		}
		t.Fatal(err)
	}
	work = filepath.Join(work, "totals-as") // the setup block made it and went into it
	if err := os.WriteFile(filepath.Join(work, "index.ts"), []byte(indexTS), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := run(build)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("projhost test printed\n%s\nthe README shows\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The package is used as the README says: by path, at the pinned compiler version.
	pkg, err := os.ReadFile(filepath.Join(work, "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"@projhost/sdk": "file:`, `"assemblyscript": "0.28.20"`} {
		if !bytes.Contains(pkg, []byte(w)) {
			t.Errorf("package.json lacks %s:\n%s", w, pkg)
		}
	}
}
