package samtemplate_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// instruction is one Dockerfile instruction: its keyword (upper case) and its arguments, with
// continuation lines joined.
type instruction struct{ cmd, args string }

// stage is a build stage: its FROM arguments and its instructions.
type stage struct {
	from string
	ins  []instruction
}

func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, stage{from: in.args})
			return
		}
		require.NotEmpty(t, stages, "%s before FROM", in.cmd)
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " \t"), "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		flush()
	}
	flush()
	return stages
}

func (s stage) last(cmd string) (string, bool) {
	for i := len(s.ins) - 1; i >= 0; i-- {
		if s.ins[i].cmd == cmd {
			return s.ins[i].args, true
		}
	}
	return "", false
}

// TestDockerfile: a multi-stage build of a static projhost (the SQLite driver is pure Go) into a
// distroless image that runs as a non-root user, with /projhost as its entrypoint. Parsed, not
// built: no Docker engine runs the tests.
func TestDockerfile(t *testing.T) {
	gomod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	require.Contains(t, string(gomod), "modernc.org/sqlite ", "CGO_ENABLED=0 holds for a pure Go SQLite driver")
	require.NotContains(t, string(gomod), "mattn/go-sqlite3")

	stages := parseDockerfile(t, "../../Dockerfile")
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage")
	build, final := stages[0], stages[len(stages)-1]
	require.Contains(t, build.from, "golang:1.26")

	var built bool
	for _, in := range build.ins {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			built = true
			for _, want := range []string{"CGO_ENABLED=0", "-o /out/projhost", "./cmd/projhost"} {
				require.Contains(t, in.args, want)
			}
		}
	}
	require.True(t, built, "the build stage runs go build")

	// `go mod download` runs before the sources are copied (a cached layer): it needs go.mod of
	// every module the main go.mod replaces with a directory of the repository (the Go SDK).
	var copied []string
	var downloaded bool
	for _, in := range build.ins {
		switch {
		case in.cmd == "COPY" && !downloaded:
			copied = append(copied, strings.Fields(in.args)...)
		case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
			downloaded = true
		}
	}
	require.True(t, downloaded, "the build stage runs go mod download")
	var local int
	for _, l := range strings.Split(string(gomod), "\n") {
		_, dir, ok := strings.Cut(l, "=> ./")
		if !ok || !strings.HasPrefix(strings.TrimSpace(l), "replace ") {
			continue
		}
		local++
		require.Contains(t, copied, strings.TrimSpace(dir)+"/go.mod", "copied before go mod download")
	}
	require.Positive(t, local, "go.mod replaces the Go SDK module with ./sdk/go")

	for _, c := range []struct {
		cmd   string
		check func(t *testing.T, args string)
	}{
		{"COPY", func(t *testing.T, args string) { require.Equal(t, "--from=build /out/projhost /projhost", args) }},
		{"USER", func(t *testing.T, args string) {
			user, _, _ := strings.Cut(args, ":")
			require.NotContains(t, []string{"", "0", "root"}, user, "a non-root user")
		}},
		{"ENTRYPOINT", func(t *testing.T, args string) {
			var argv []string
			require.NoError(t, json.Unmarshal([]byte(args), &argv), "exec form")
			require.Equal(t, []string{"/projhost"}, argv)
		}},
		{"CMD", func(t *testing.T, args string) {
			var argv []string
			require.NoError(t, json.Unmarshal([]byte(args), &argv), "exec form")
			require.Equal(t, []string{"run", "--help"}, argv)
		}},
	} {
		t.Run(c.cmd, func(t *testing.T) {
			args, ok := final.last(c.cmd)
			require.True(t, ok, "the final stage has %s", c.cmd)
			c.check(t, args)
		})
	}
	require.True(t, strings.HasPrefix(final.from, "gcr.io/distroless/static"), final.from)
}
