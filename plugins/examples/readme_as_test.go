package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n### Building an AssemblyScript handler outside this repository\n")
	if !ok {
		t.Fatal("README has no section \"Building an AssemblyScript handler outside this repository\"")
	}
	sec, _, _ = strings.Cut(sec, "\n### ")
	blocks := regexp.MustCompile("(?s)```(sh|ts)\n(.*?)```").FindAllStringSubmatch(sec, -1)
	if len(blocks) != 3 || blocks[0][1] != "sh" || blocks[1][1] != "ts" || blocks[2][1] != "sh" {
		t.Fatalf("want the blocks sh, ts, sh in the section; found %d", len(blocks))
	}
	setup, indexTS, build := blocks[0][2], blocks[1][2], blocks[2][2]
	var want []string
	for _, l := range strings.Split(build, "\n") {
		if s, ok := strings.CutPrefix(l, "# {"); ok {
			want = append(want, "{"+s)
		}
	}
	if len(want) == 0 {
		t.Fatal("the build block shows no read model")
	}

	npmCache, err := exec.Command("npm", "config", "get", "cache").Output()
	if err != nil {
		t.Fatalf("npm config get cache: %v", err)
	}
	home, bin, work := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(root, filepath.Join(home, "projhost")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "projhost"), "./cmd/projhost")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building projhost: %v\n%s", err, out)
	}
	env := []string{
		"HOME=" + home, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"npm_config_cache=" + strings.TrimSpace(string(npmCache)), "npm_config_prefer_offline=true",
		"npm_config_audit=false", "npm_config_fund=false", "npm_config_update_notifier=false",
	}
	run := func(script string) (string, error) {
		t.Helper()
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = work, env
		var out, errw bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errw
		if err := cmd.Run(); err != nil {
			return out.String(), &scriptError{err, script, out.String(), errw.String()}
		}
		return out.String(), nil
	}

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

type scriptError struct {
	err                 error
	script, out, stderr string
}

func (e *scriptError) Error() string {
	return e.err.Error() + "\nscript:\n" + e.script + "\nstdout:\n" + e.out + "\nstderr:\n" + e.stderr
}
