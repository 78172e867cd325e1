package examples_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Helpers of the README tests (readme_test.go, readme_as_test.go), which follow a README section
// as a new user would.

// readmeBlocks returns the fenced code blocks of the README section titled heading (a "### "
// line), up to stop, or to the next "### " heading when stop is "", and checks that their
// languages are langs, in order.
func readmeBlocks(t *testing.T, root, heading, stop string, langs ...string) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n### "+heading+"\n")
	if !ok {
		t.Fatalf("README has no section %q", heading)
	}
	if stop == "" {
		stop = "\n### "
	}
	sec, _, _ = strings.Cut(sec, stop)
	found := regexp.MustCompile("(?s)```([a-z]+)\n(.*?)```").FindAllStringSubmatch(sec, -1)
	var got []string
	for _, b := range found {
		got = append(got, b[1])
	}
	if strings.Join(got, " ") != strings.Join(langs, " ") {
		t.Fatalf("README section %q: blocks %q, want %q", heading, got, langs)
	}
	blocks := make([]string, len(found))
	for i, b := range found {
		blocks[i] = b[2]
	}
	return blocks
}

// shownReadModel returns the read model a README block shows: its "# {...}" lines, uncommented.
func shownReadModel(t *testing.T, block string) []string {
	t.Helper()
	var want []string
	for _, l := range strings.Split(block, "\n") {
		if s, ok := strings.CutPrefix(l, "# {"); ok {
			want = append(want, "{"+s)
		}
	}
	if len(want) == 0 {
		t.Fatal("the README block shows no read model")
	}
	return want
}

// newUser returns a fresh home directory holding projhost, a link to the checkout at root, and a
// directory holding a projhost binary built from the checkout.
func newUser(t *testing.T, root string) (home, bin string) {
	t.Helper()
	home, bin = t.TempDir(), t.TempDir()
	if err := os.Symlink(root, filepath.Join(home, "projhost")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "projhost"), "./cmd/projhost")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building projhost: %v\n%s", err, out)
	}
	return home, bin
}

// runScript runs script with bash -euo pipefail in dir with env and returns its stdout; its
// error carries the script and both outputs.
func runScript(dir string, env []string, script string) (string, error) {
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out, errw bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errw
	if err := cmd.Run(); err != nil {
		return out.String(), &scriptError{err, script, out.String(), errw.String()}
	}
	return out.String(), nil
}

type scriptError struct {
	err                 error
	script, out, stderr string
}

func (e *scriptError) Error() string {
	return e.err.Error() + "\nscript:\n" + e.script + "\nstdout:\n" + e.out + "\nstderr:\n" + e.stderr
}
