#!/bin/sh
# Installs Debian's bubblewrap into a project-local folder (make .tools/bwrap/usr/bin/bwrap):
# `apt-get download` and `dpkg-deb -x`, no root install, no system change. Idempotent: a bwrap
# already there that runs is kept. Fails with one clear line when it cannot be done, so the
# sandbox tests never skip silently (ledger/sandbox/bwrap.py finds it here when not on PATH).
set -eu
dest=${1:-.tools/bwrap}
bin="$dest/usr/bin/bwrap"
fail() { echo "install_bwrap: $*" >&2; exit 1; }
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then exit 0; fi
command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install Debian's bubblewrap package (or put bwrap on PATH), then rerun make"
command -v dpkg-deb >/dev/null 2>&1 || fail "dpkg-deb not found: install Debian's bubblewrap package (or put bwrap on PATH), then rerun make"
work=$(mktemp -d "${TMPDIR:-/tmp}/install-bwrap.XXXXXX")
trap 'rm -rf "$work"' EXIT
# _apt cannot write into a private mktemp folder: let it own the folder for the download.
chmod 755 "$work"
( cd "$work" && { apt-get download -q bubblewrap >/dev/null 2>&1 || \
  { apt-get update -q >/dev/null 2>&1 && apt-get download -q bubblewrap >/dev/null 2>&1; }; } ) \
  || fail "apt-get download bubblewrap failed (no network or no Debian archive): install bubblewrap, then rerun make"
deb=$(ls "$work"/bubblewrap_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "apt-get download left no bubblewrap_*.deb"
dpkg-deb -x "$deb" "$work/x" || fail "dpkg-deb -x $deb failed"
[ -x "$work/x/usr/bin/bwrap" ] || fail "$deb holds no usr/bin/bwrap"
if ldd "$work/x/usr/bin/bwrap" 2>&1 | grep -q 'not found'; then
  fail "bwrap's shared libraries do not resolve: $(ldd "$work/x/usr/bin/bwrap" | grep 'not found' | tr '\n' ' ')"
fi
"$work/x/usr/bin/bwrap" --version >/dev/null 2>&1 || fail "the downloaded bwrap does not run"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.new" && mv "$work/x" "$dest.new" && rm -rf "$dest" && mv "$dest.new" "$dest"
echo "installed $("$bin" --version) at $bin"
