// Package admin is the admin HTTP API of a projhost worker, served on its listener (`projhost
// run --listen ADDR` with an admin token; package web): the management verbs over HTTP, each
// calling the library the CLI verb calls (manage, deadletter, deploy), on the worker's stores,
// source and module store.
//
// # Off unless a token is configured
//
// New refuses a Config without tokens, and the CLI mounts the API only when a token is given
// (`run --admin-token-file PATH` / `--admin-read-token-file PATH`, or the environment variables
// PROJHOST_ADMIN_TOKEN / PROJHOST_ADMIN_READ_TOKEN: LoadTokens). Without one, /admin/ answers
// the listener's plain 404.
//
// # Authentication and scopes
//
// Every request carries `Authorization: Bearer TOKEN`. The token is compared with each
// configured one in constant time: their SHA-256 digests are compared with crypto/subtle, so
// neither the length nor a common prefix of a guess tells anything. A token has a Scope:
// ScopeRead reaches the read-only routes, ScopeAdmin every route. Tokens are 32 to 512 bytes of
// printable ASCII without spaces (CheckToken; e.g. `openssl rand -hex 32`).
//
// Answers: 401 (no or unknown token; with WWW-Authenticate), 403 (a read-only token on a
// mutating route), 404 (unknown path, another projection, no such shard, letter or version),
// 405 (wrong method; with Allow), 400 (a bad parameter or body), 413 (a body over
// Config.MaxBodyBytes), 415 (a body that is not application/json), 409 (the state forbids it:
// a finished shard, a letter already replayed, a registry change in between, ...), 501 (the
// store cannot do it), 503 (the store did not answer within Config.OpTimeout), 500 (anything
// else: the error is logged with the request id, not sent). Every error body is
// {"error": "what went wrong and what to do", "request_id": N}.
//
// # Requests
//
// Bodies are optional JSON objects (empty or {} when no field is given), at most
// Config.MaxBodyBytes, decoded strictly: field names exactly as below (case-sensitive), each at
// most once, no other field, one value only. Query parameters likewise: only those listed, each
// at most once. Parameters are checked with the CLI's validators: projection.CheckName,
// manage.ParseTarget, event.ValidSeq (deadletter.ValidateKey), deadletter.State.Valid.
//
// Routes (prefix /admin/v1/projections/{name}, where {name} is the worker's projection; path
// segments are URL-escaped):
//
//	method  path                                  body                     scope  what it does
//	POST    /pause                                {"shard"}                admin  manage.Pause (the projection, or one shard)
//	POST    /resume                               {"shard"}                admin  manage.Resume
//	POST    /reset                                {"shard", "to"}          admin  manage.Reset; "to" required: SEQ, trim-horizon, latest, RFC 3339 time
//	POST    /rebuild                              -                        admin  manage.Rebuild
//	GET     /status                               -                        read   status.Rows: the shards as `projhost status --json` shows them
//	GET     /deadletters?shard=S&state=X          -                        read   deadletter list (no event data)
//	GET     /deadletters/{shard}/{seq}            -                        read   one dead letter with its event data
//	POST    /deadletters/replay                   {"shard"}                admin  deadletter.Replay of every failed letter (of the shard)
//	POST    /deadletters/{shard}/{seq}/replay     -                        admin  deadletter.Replay of one letter
//	POST    /deadletters/{shard}/{seq}/drop       -                        admin  deadletter.Drop of one letter
//	GET     /versions                             -                        read   the active version and every version
//	POST    /versions/{n}/activate                -                        admin  deploy.Activate
//	POST    /versions/rollback                    -                        admin  deploy.Rollback
//
// "shard" is optional (absent: the whole projection; an empty string is refused). Mutating
// calls run to their end even when the client goes away (bounded by Config.OpTimeout), so a
// reset is not left half-way by a dropped connection.
//
// # Audit log
//
// Every request to a mutating route, and every request refused for its token, is one slog
// record "admin request" (Info when it succeeded, Warn when refused, Error for a 500) with
// request_id, token (the token's Name and the first 8 hex digits of its SHA-256: never the
// token), remote (the connection's address), method, path, params (a group: what the request
// asked, after validation), status, and err. Read-only requests are logged at Debug.
//
// # Concurrency
//
// An API is safe for concurrent use; the operations are as safe to run concurrently as their
// libraries (manage fences resets; deadletter and deploy use conditional writes).
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/projhost/projhost/projection"
	"github.com/projhost/projhost/registry"
	"github.com/projhost/projhost/source"
	"github.com/projhost/projhost/status"
	"github.com/projhost/projhost/store"
)

// Pattern is the http.ServeMux pattern to mount an API on: every path under /admin/.
const Pattern = "/admin/"

// Prefix is the routes' common prefix.
const Prefix = "/admin/v1/projections/"

// Limits and defaults.
const (
	MinTokenBytes       = 32
	MaxTokenBytes       = 512
	DefaultMaxBodyBytes = 4 << 10
	// DefaultOpTimeout bounds one operation (a reset's settle and fencing included): below
	// web.DefaultWriteTimeout (30s), so the answer still gets out.
	DefaultOpTimeout = 25 * time.Second
)

// Environment variables LoadTokens reads.
const (
	EnvAdminToken = "PROJHOST_ADMIN_TOKEN"
	EnvReadToken  = "PROJHOST_ADMIN_READ_TOKEN"
)

// ErrConfig is wrapped by the errors of Config.Validate, CheckToken and LoadTokens.
var ErrConfig = errors.New("admin: bad configuration")

// Scope is what a token may reach.
type Scope int

const (
	// ScopeRead reaches the read-only routes (GET).
	ScopeRead Scope = iota + 1
	// ScopeAdmin reaches every route.
	ScopeAdmin
)

func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Token is one bearer token the API accepts.
type Token struct {
	// Name says whose token it is in the audit log (with a fingerprint of Secret): 1 to 64
	// bytes of letters, digits, '-', '_' and '.'. LoadTokens names them "admin" and "read".
	Name   string
	Secret string // CheckToken
	Scope  Scope
}

// ID is how the audit log names the token: Name, a colon and the first 8 hex digits of the
// SHA-256 of Secret (which tells rotated tokens apart and reveals nothing usable of it).
func (t Token) ID() string {
	sum := sha256.Sum256([]byte(t.Secret))
	return t.Name + ":" + hex.EncodeToString(sum[:4])
}

// CheckToken returns an error wrapping ErrConfig unless secret is MinTokenBytes to
// MaxTokenBytes of printable ASCII without spaces (what an Authorization header carries
// unchanged). The one place a token is accepted or refused.
func CheckToken(secret string) error {
	if len(secret) < MinTokenBytes || len(secret) > MaxTokenBytes {
		return fmt.Errorf("%w: a token of %d bytes: use %d to %d (e.g. `openssl rand -hex 32` gives 64)", ErrConfig, len(secret), MinTokenBytes, MaxTokenBytes)
	}
	for i := 0; i < len(secret); i++ {
		if c := secret[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: the token holds a byte 0x%02x at offset %d: use printable ASCII without spaces (e.g. `openssl rand -hex 32`)", ErrConfig, c, i)
		}
	}
	return nil
}

// TokenSources are where LoadTokens finds the tokens: a file each (its content, surrounding
// white space removed), else the environment variable (EnvAdminToken, EnvReadToken).
type TokenSources struct {
	AdminFile string // the admin token (`run --admin-token-file`)
	ReadFile  string // the read-only token (`run --admin-read-token-file`)
}

// LoadTokens reads the admin and read-only tokens from their files or, for those without a
// file, from the environment (getenv, e.g. os.Getenv), and checks them (CheckToken; the two
// must differ). It returns none when neither is configured (the API stays off), else a Token
// named "admin" (ScopeAdmin) and/or "read" (ScopeRead). Errors wrap ErrConfig and name the
// source: a file that cannot be read, a file and its variable both given, a bad token.
func LoadTokens(src TokenSources, getenv func(string) string) ([]Token, error) {
	var out []Token
	for _, s := range []struct {
		name, file, env, flag string
		scope                 Scope
	}{
		{"admin", src.AdminFile, EnvAdminToken, "--admin-token-file", ScopeAdmin},
		{"read", src.ReadFile, EnvReadToken, "--admin-read-token-file", ScopeRead},
	} {
		secret, from := getenv(s.env), "$"+s.env
		if s.file != "" {
			if secret != "" {
				return nil, fmt.Errorf("%w: the %s token is given twice, by %s and by $%s: give one", ErrConfig, s.name, s.flag, s.env)
			}
			b, err := readSmall(s.file, MaxTokenBytes+64)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %w", ErrConfig, s.flag, err)
			}
			secret, from = strings.TrimSpace(string(b)), s.flag+" "+s.file
		}
		if secret == "" && s.file == "" {
			continue
		}
		if err := CheckToken(secret); err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
		out = append(out, Token{Name: s.name, Secret: secret, Scope: s.scope})
	}
	if len(out) == 2 && subtle.ConstantTimeCompare([]byte(out[0].Secret), []byte(out[1].Secret)) == 1 {
		return nil, fmt.Errorf("%w: the admin and the read-only token are the same: give the read-only one a token of its own", ErrConfig)
	}
	return out, nil
}

// readSmall reads a file of at most max bytes.
func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over %d bytes: it should hold the token only", path, max)
	}
	return b, nil
}

// Config configures an API.
type Config struct {
	// Projection is the worker's projection, the one {name} the routes serve (another answers
	// 404: the worker's source and module store are its projection's). Required.
	Projection string
	// Stores are the worker's stores. Required; the registry (Stores.Registry) for /versions.
	Stores *store.Stores
	// Source resolves reset targets latest and TIME (manage.Reset); nil: they are refused.
	Source source.Source
	// Status reads GET /status's rows (status.Rows); nil: that route answers 501.
	Status *status.Config
	// Blobs is the module store activate and rollback check a version's bytes in; nil: they
	// answer 501.
	Blobs registry.Blobs
	// Tokens are the accepted bearer tokens: at least one; distinct secrets and names.
	Tokens []Token
	// Settle is manage.Options.Settle for reset and rebuild (0: manage's default, 2s;
	// negative: no wait).
	Settle time.Duration
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes, 4 KiB).
	MaxBodyBytes int64
	// OpTimeout bounds one operation (default DefaultOpTimeout, 25s).
	OpTimeout time.Duration
	// Logger receives the audit records (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate checks c and fills in the defaults. Errors wrap ErrConfig.
func (c *Config) Validate() error {
	if err := projection.CheckName(c.Projection); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.Stores == nil {
		return fmt.Errorf("%w: no stores", ErrConfig)
	}
	if len(c.Tokens) == 0 {
		return fmt.Errorf("%w: no token: the admin API stays off without one (run --admin-token-file PATH or $%s)", ErrConfig, EnvAdminToken)
	}
	names, sums := map[string]bool{}, map[[32]byte]bool{}
	for _, t := range c.Tokens {
		if !validTokenName(t.Name) {
			return fmt.Errorf("%w: token name %q: use 1 to 64 letters, digits, '-', '_' or '.'", ErrConfig, t.Name)
		}
		if t.Scope != ScopeRead && t.Scope != ScopeAdmin {
			return fmt.Errorf("%w: token %s has no scope (ScopeRead or ScopeAdmin)", ErrConfig, t.Name)
		}
		if err := CheckToken(t.Secret); err != nil {
			return fmt.Errorf("token %s: %w", t.Name, err)
		}
		sum := sha256.Sum256([]byte(t.Secret))
		if names[t.Name] || sums[sum] {
			return fmt.Errorf("%w: token %s is given twice (by name or secret): give each its own", ErrConfig, t.Name)
		}
		names[t.Name], sums[sum] = true, true
	}
	if c.MaxBodyBytes < 0 || c.OpTimeout < 0 {
		return fmt.Errorf("%w: MaxBodyBytes and OpTimeout must not be negative (0 takes the default)", ErrConfig)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

func validTokenName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, c := range n {
		if !(c == '-' || c == '_' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// API is the admin API, an http.Handler for every path under Pattern.
type API struct {
	cfg    Config
	tokens []token
	mux    *http.ServeMux
	nextID atomic.Uint64
}

// token is a Token with the digest requests are compared against.
type token struct {
	Token
	sum [sha256.Size]byte
	id  string
}

// New checks cfg and returns the API. Errors: ErrConfig's.
func New(cfg Config) (*API, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &API{cfg: cfg, mux: http.NewServeMux()}
	for _, t := range cfg.Tokens {
		a.tokens = append(a.tokens, token{Token: t, sum: sha256.Sum256([]byte(t.Secret)), id: t.ID()})
	}
	a.routes()
	return a, nil
}

// authenticate returns the token the Authorization header carries, or nil. The presented
// token's SHA-256 is compared with every configured one's in constant time (every one, even
// after a match), so the time taken tells nothing of the length or the content of a guess.
func (a *API) authenticate(header string) *token {
	const scheme = "Bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return nil
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(header[len(scheme):])))
	var found *token
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(got[:], a.tokens[i].sum[:]) == 1 {
			found = &a.tokens[i]
		}
	}
	return found
}
