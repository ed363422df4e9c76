#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fetches the CPython releases newer than this machine's (Debian unstable's python3.14 and
# python3.15, with their headers) so that the Python tests also run under them, as users run them.
# Debian 12 cannot install them (they need a newer glibc), so each is unpacked, not installed,
# beside unstable's own glibc, and run through that glibc's loader by a wrapper:
#   DEST/<version>/bin/python3.X   (tests/python/find_pythons.py lists these)
# Nothing outside DEST is touched; a version already unpacked is kept. Without network access it
# says so and exits 0: the tests then run under the interpreters the machine has.
#
# Usage: scripts/fetch-pythons.sh [DEST]   (default: $GPUMEMPROF_PYTHONS or ~/.cache/gpumemprof/pythons)
set -uo pipefail

DEST=${1:-${GPUMEMPROF_PYTHONS:-$HOME/.cache/gpumemprof/pythons}}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
MINORS=(3.14 3.15)
command -v curl >/dev/null || { echo "fetch-pythons: no curl; skipped"; exit 0; }
command -v dpkg-deb >/dev/null || { echo "fetch-pythons: no dpkg-deb; skipped"; exit 0; }
mkdir -p "$DEST" || exit 0
tmp=$(mktemp -d) || exit 0
trap 'rm -rf "$tmp"' EXIT

if ! curl -fsS --max-time 120 "$MIRROR/dists/sid/main/binary-amd64/Packages.xz" -o "$tmp/Packages.xz"; then
    echo "fetch-pythons: cannot reach $MIRROR; the Python tests run without 3.14/3.15"
    exit 0
fi
xz -dc "$tmp/Packages.xz" >"$tmp/Packages" || exit 0

# "version filename" of one binary package of the index.
package() {
    awk -v want="$1" '$1 == "Package:" { p = ($2 == want) } p && $1 == "Version:" { v = $2 }
        p && $1 == "Filename:" { print v, $2; exit }' "$tmp/Packages"
}

unpack() { # unpack PACKAGE INTO
    local info
    info=$(package "$1")
    [ -n "$info" ] || { echo "fetch-pythons: $1 is not in the index"; return 1; }
    curl -fsS --max-time 300 "$MIRROR/${info#* }" -o "$tmp/p.deb" && dpkg-deb -x "$tmp/p.deb" "$2"
}

read -r libc_version _ <<<"$(package libc6)"
for minor in "${MINORS[@]}"; do
    read -r version _ <<<"$(package "python$minor-minimal")"
    [ -n "${version:-}" ] || { echo "fetch-pythons: no python$minor in Debian unstable"; continue; }
    dir="$DEST/$minor-$version"
    if [ -x "$dir/bin/python$minor" ]; then
        echo "fetch-pythons: python$minor $version already in $dir"
        continue
    fi
    rm -rf "$dir.part" && mkdir -p "$dir.part/bin" || continue
    ok=1
    for p in "python$minor-minimal" "libpython$minor-minimal" "libpython$minor-stdlib" "libpython$minor-dev" \
        "libpython$minor" libc6; do
        unpack "$p" "$dir.part/root" || { ok=0; break; }
    done
    [ "$ok" = 1 ] || { rm -rf "$dir.part"; continue; }
    # The loader of unstable's glibc runs the interpreter; the caller's LD_LIBRARY_PATH (the
    # simulated driver's directory, in the tests) comes after that glibc's own directory.
    cat >"$dir.part/bin/python$minor" <<EOF
#!/bin/sh
# Debian unstable's python$minor $version with its glibc $libc_version (scripts/fetch-pythons.sh).
root="\$(cd "\$(dirname "\$0")/.." && pwd)/root"
libc="\$root/usr/lib/x86_64-linux-gnu"
PYTHONHOME="\$root/usr" exec "\$libc/ld-linux-x86-64.so.2" --argv0 "\$0" \\
    --library-path "\$libc\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" "\$root/usr/bin/python$minor" "\$@"
EOF
    chmod +x "$dir.part/bin/python$minor"
    if "$dir.part/bin/python$minor" -c 'import ctypes, json, threading' 2>"$tmp/err"; then
        mv "$dir.part" "$dir" && echo "fetch-pythons: python$minor $version in $dir"
    else
        echo "fetch-pythons: python$minor $version does not start here: $(head -c 300 "$tmp/err")"
        rm -rf "$dir.part"
    fi
done
exit 0
