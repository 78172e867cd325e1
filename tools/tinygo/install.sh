#!/usr/bin/env bash
# tools/tinygo/install.sh DIR — installs TinyGo into DIR (DIR/bin/tinygo) from what this machine
# kind reaches: TinyGo's source from the Go module proxy, built against Debian's LLVM 19, with
# the C libraries TinyGo would build from its git submodules (which a module zip lacks) taken
# prebuilt from Debian's packages. Idempotent: does nothing when DIR/bin/tinygo is this version.
#
# Steps and the workarounds each needed (issue 14, item 4):
#  1. Debian packages llvm-19-dev clang-19 libclang-19-dev lld-19 (TinyGo links LLVM and libclang
#     dynamically with -tags llvm19 and runs clang-19 and wasm-ld-19), wasi-libc and
#     libclang-rt-19-dev-wasm32 (the prebuilt libc and compiler-rt builtins for wasm32), and
#     binaryen: TinyGo runs wasm-opt on every wasm32 output (Debian's is version 108; it works).
#  2. The source: `go mod download -json github.com/tinygo-org/tinygo@vVERSION`, copied into DIR
#     (DIR is TINYGOROOT: DIR/src, DIR/targets, ...; the module cache copy is read-only).
#  3. Workaround: tinygo.org/x/espflasher (required by main.go, only for flashing ESP32 boards) is
#     not served by the module proxy (403 "This module version is not available"); a stub module
#     in DIR/stub/espflasher replaces it (go.mod replace), so `tinygo flash` to an ESP32 fails.
#  4. Workaround: src/net is a git submodule too (github.com/tinygo-org/net, not on the module
#     proxy either: 403); TinyGo's GOROOT overlay needs the directories src/net and src/net/http to
#     exist, so they are created empty: a program importing net or net/http does not build (a
#     projhost handler has no network anyway).
#  5. `go build -tags llvm19 -o DIR/bin/tinygo.bin .` in DIR.
#  6. Workaround: TinyGo builds wasi-libc and compiler-rt from the sources of its git submodules
#     (lib/wasi-libc, llvm-project/compiler-rt), absent from the module zip; it first looks for
#     its build cache ($XDG_CACHE_HOME/tinygo/<lib>-<triple>-<cpu>/lib.a and include/), so the
#     cache in DIR/cache is seeded with Debian's libc.a + headers and libclang_rt.builtins-wasm32.a,
#     and DIR/bin/tinygo is a wrapper that points XDG_CACHE_HOME there (keeping the go command's
#     own GOCACHE where it was).
set -euo pipefail

VERSION=${TINYGO_VERSION:-0.42.0}
LLVM=19
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
mkdir -p "$1"
DIR=$(cd "$1" && pwd)
GO=${GO:-go}
export GOFLAGS=-mod=mod

say() { echo "tinygo-install: $*"; }

if [ -x "$DIR/bin/tinygo" ] && "$DIR/bin/tinygo" version 2>/dev/null | grep -q "tinygo version $VERSION "; then
	say "$("$DIR/bin/tinygo" version) already in $DIR; nothing to do"
	exit 0
fi
start=$SECONDS

# 1. Debian packages.
PKGS=(llvm-$LLVM-dev clang-$LLVM libclang-$LLVM-dev lld-$LLVM wasi-libc libclang-rt-$LLVM-dev-wasm32 binaryen)
missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
	say "installing Debian packages: ${missing[*]}"
	$SUDO apt-get install -y --no-install-recommends "${missing[@]}" || {
		say "apt-get install failed; trying after apt-get update"
		$SUDO apt-get update && $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
	}
else
	say "Debian packages present: ${PKGS[*]}"
fi

# 2. The source, from the module proxy.
say "go mod download github.com/tinygo-org/tinygo@v$VERSION"
SRC=$($GO mod download -json "github.com/tinygo-org/tinygo@v$VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$SRC/src/runtime" ] || { say "no TinyGo source in '$SRC'" >&2; exit 1; }
say "copying $SRC into $DIR"
rm -rf "$DIR/bin" "$DIR/stub"
cp -a "$SRC/." "$DIR/"
chmod -R u+w "$DIR"

# 3. The espflasher stub.
say "stubbing tinygo.org/x/espflasher (not on the module proxy)"
mkdir -p "$DIR/stub/espflasher/pkg/espflasher"
cat > "$DIR/stub/espflasher/go.mod" <<'GOMOD'
module tinygo.org/x/espflasher

go 1.22
GOMOD
cat > "$DIR/stub/espflasher/pkg/espflasher/stub.go" <<'GOSRC'
// Package espflasher is a stub of tinygo.org/x/espflasher, which the Go module proxy does not
// serve: projhost's tools/tinygo/install.sh builds TinyGo for WebAssembly only.
package espflasher

import (
	"errors"
	"io"
)

type ResetMode int

const ResetUSBJTAG ResetMode = 1

type StdoutLogger struct{ W io.Writer }

type Options struct {
	Compress  bool
	Logger    any
	ResetMode ResetMode
}

func DefaultOptions() *Options { return &Options{} }

type Flasher struct{}

func New(port string, opts *Options) (*Flasher, error) {
	return nil, errors.New("ESP32 flashing is not in this TinyGo build (tinygo.org/x/espflasher is stubbed)")
}

func (*Flasher) Close() error                                          { return nil }
func (*Flasher) ChipName() string                                      { return "" }
func (*Flasher) EraseFlash(func(current, total int)) error             { return errors.New("stub") }
func (*Flasher) FlashImage([]byte, uint32, func(current, total int)) error { return errors.New("stub") }
func (*Flasher) Reset()                                                {}
GOSRC
(cd "$DIR" && $GO mod edit -replace tinygo.org/x/espflasher=./stub/espflasher)

# 4. The missing src/net submodule.
say "creating empty src/net and src/net/http (a git submodule, not in the module zip)"
mkdir -p "$DIR/src/net/http"

# 5. Build against Debian's LLVM.
say "go build -tags llvm$LLVM (takes a minute or two)"
mkdir -p "$DIR/bin"
(cd "$DIR" && $GO build -tags "llvm$LLVM" -o bin/tinygo.bin .)

# 6. Seed TinyGo's library cache with Debian's prebuilt wasm32 libraries.
CACHE="$DIR/cache/tinygo"
WASI=$CACHE/wasi-libc-wasm32-unknown-wasi-generic
RT=$CACHE/compiler-rt-wasm32-unknown-wasi-generic
say "seeding $CACHE with Debian's wasi-libc and compiler-rt builtins"
rm -rf "$WASI" "$RT"
mkdir -p "$WASI" "$RT"
cp /usr/lib/wasm32-wasi/libc.a "$WASI/lib.a"
cp -a /usr/include/wasm32-wasi "$WASI/include"
cp /usr/lib/llvm-$LLVM/lib/clang/$LLVM/lib/wasi/libclang_rt.builtins-wasm32.a "$RT/lib.a"

cat > "$DIR/bin/tinygo" <<WRAP
#!/bin/sh
# TinyGo $VERSION from tools/tinygo/install.sh: its library cache is $DIR/cache (seeded with
# Debian's wasm32 libraries); the go command's own cache stays where it was.
if [ -z "\${GOCACHE:-}" ]; then GOCACHE=\$(go env GOCACHE); export GOCACHE; fi
XDG_CACHE_HOME="$DIR/cache" exec "$DIR/bin/tinygo.bin" "\$@"
WRAP
chmod +x "$DIR/bin/tinygo"
say "$("$DIR/bin/tinygo" version) installed in $DIR in $((SECONDS - start)) s"
