package admin_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/admin"
)

func TestCheckToken(t *testing.T) {
	cases := []struct {
		token string
		want  string // "" valid
	}{
		{strings.Repeat("a", admin.MinTokenBytes), ""},
		{strings.Repeat("~", admin.MaxTokenBytes), ""},
		{"", "a token of 0 bytes: use 32 to 512"},
		{strings.Repeat("a", admin.MinTokenBytes-1), "a token of 31 bytes"},
		{strings.Repeat("a", admin.MaxTokenBytes+1), "a token of 513 bytes"},
		{strings.Repeat("a", 20) + " " + strings.Repeat("b", 20), "byte 0x20 at offset 20"},
		{strings.Repeat("a", 40) + "\x7f", "byte 0x7f at offset 40"},
		{strings.Repeat("é", 20), "byte 0xc3 at offset 0"},
	}
	for _, c := range cases {
		err := admin.CheckToken(c.token)
		if c.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorIs(t, err, admin.ErrConfig)
		require.ErrorContains(t, err, c.want)
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := file("admin", adminSecret+"\n")
	goodRead := file("read", "  "+readSecret+"\r\n")
	short := file("short", "tooshort\n")
	huge := file("huge", strings.Repeat("a", 4096))
	same := file("same", adminSecret)
	cases := []struct {
		name  string
		src   admin.TokenSources
		env   map[string]string
		want  []admin.Token
		error string
	}{
		{name: "none", want: nil},
		{name: "admin file", src: admin.TokenSources{AdminFile: good},
			want: []admin.Token{{Name: "admin", Secret: adminSecret, Scope: admin.ScopeAdmin}}},
		{name: "both files", src: admin.TokenSources{AdminFile: good, ReadFile: goodRead},
			want: []admin.Token{{Name: "admin", Secret: adminSecret, Scope: admin.ScopeAdmin}, {Name: "read", Secret: readSecret, Scope: admin.ScopeRead}}},
		{name: "environment", env: map[string]string{admin.EnvReadToken: readSecret},
			want: []admin.Token{{Name: "read", Secret: readSecret, Scope: admin.ScopeRead}}},
		{name: "file and environment", src: admin.TokenSources{AdminFile: good}, env: map[string]string{admin.EnvAdminToken: adminSecret},
			error: "given twice, by --admin-token-file and by $PROJHOST_ADMIN_TOKEN"},
		{name: "short file", src: admin.TokenSources{AdminFile: short}, error: "--admin-token-file " + short + ": admin: bad configuration: a token of 8 bytes"},
		{name: "short environment", env: map[string]string{admin.EnvReadToken: "x"}, error: "$PROJHOST_ADMIN_READ_TOKEN: admin: bad configuration: a token of 1 bytes"},
		{name: "missing file", src: admin.TokenSources{ReadFile: filepath.Join(dir, "nope")}, error: "--admin-read-token-file: open"},
		{name: "huge file", src: admin.TokenSources{AdminFile: huge}, error: "it should hold the token only"},
		{name: "empty file", src: admin.TokenSources{AdminFile: file("empty", "\n")}, error: "a token of 0 bytes"},
		{name: "the same token twice", src: admin.TokenSources{AdminFile: good, ReadFile: same}, error: "are the same"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := admin.LoadTokens(c.src, func(k string) string { return c.env[k] })
			if c.error != "" {
				require.ErrorIs(t, err, admin.ErrConfig)
				require.ErrorContains(t, err, c.error)
				require.NotContains(t, err.Error(), adminSecret, "an error message carries the token")
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

func TestConfigValidate(t *testing.T) {
	st := openSQLite(t)
	tok := admin.Token{Name: "admin", Secret: adminSecret, Scope: admin.ScopeAdmin}
	cases := []struct {
		name string
		cfg  admin.Config
		want string
	}{
		{"no token", admin.Config{Projection: proj, Stores: st}, "no token: the admin API stays off"},
		{"no projection", admin.Config{Stores: st, Tokens: []admin.Token{tok}}, "projection name is required"},
		{"no stores", admin.Config{Projection: proj, Tokens: []admin.Token{tok}}, "no stores"},
		{"no scope", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{{Name: "x", Secret: adminSecret}}}, "has no scope"},
		{"bad name", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{{Name: "a b", Secret: adminSecret, Scope: admin.ScopeRead}}}, `token name "a b"`},
		{"short secret", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{{Name: "x", Secret: "short", Scope: admin.ScopeRead}}}, "a token of 5 bytes"},
		{"same secret twice", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{tok, {Name: "y", Secret: adminSecret, Scope: admin.ScopeRead}}}, "given twice"},
		{"same name twice", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{tok, {Name: "admin", Secret: readSecret, Scope: admin.ScopeRead}}}, "given twice"},
		{"negative body limit", admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{tok}, MaxBodyBytes: -1}, "must not be negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := admin.New(c.cfg)
			require.True(t, errors.Is(err, admin.ErrConfig), "%v", err)
			require.ErrorContains(t, err, c.want)
		})
	}
	cfg := admin.Config{Projection: proj, Stores: st, Tokens: []admin.Token{tok}}
	require.NoError(t, cfg.Validate())
	require.EqualValues(t, admin.DefaultMaxBodyBytes, cfg.MaxBodyBytes)
	require.Equal(t, admin.DefaultOpTimeout, cfg.OpTimeout)
}
