#!/usr/bin/env bash
# Cross-build pyconvtbc for aarch64 (64-bit ARM Linux) and run the emulation test subset under qemu-user, on an
# x86-64 Debian 12 machine.
#
#   tools/aarch64_test.sh [CACHE_DIR]     # default: $PYCONVTBC_AARCH64_CACHE, else ~/.cache/pyconvtbc-aarch64
#   STEPS="build test" tools/aarch64_test.sh    # only these steps (apt binfmt sysroot venv deps src build test compare)
#   PYTEST_ARGS="-x -k 'narrow or hooks'" tools/aarch64_test.sh   # extra pytest arguments (shell words)
#   COMPARE_PYTHON=/path/to/x86/venv/bin/python tools/aarch64_test.sh   # also step compare (below)
#
# What it does, each step skipping what is already in place (so a rerun only re-syncs, rebuilds what changed and
# tests):
#   apt      Debian's cross compiler (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and qemu-user-static; dpkg's
#            arm64 foreign architecture (needed to download arm64 .debs).  Needs root, or sudo.
#   binfmt   registers qemu-aarch64 with binfmt_misc (system-wide), so that the arm64 Python can start arm64
#            children: pip's build backend, setup.py's OpenMP probe, tests that start sys.executable.
#   sysroot  the arm64 .debs of python3.11 and the libraries it and the extension load, downloaded into
#            CACHE_DIR/debs and unpacked into CACHE_DIR/sysroot.  (Debian 12 cannot install python3.11:arm64
#            beside the host's amd64 python3.11, hence a private sysroot; qemu finds the arm64 loader and
#            libraries there through QEMU_LD_PREFIX.)
#   venv     an arm64 virtual environment, CACHE_DIR/venv, made by that interpreter.
#   deps     numpy, ml_dtypes, Cython, setuptools, pytest, hypothesis: their aarch64 wheels from PyPI (pip's cache
#            in CACHE_DIR/pip; wheels only, nothing is compiled under emulation).
#   src      this repository's files (tracked and untracked-not-ignored: what `git status` would show) copied into
#            CACHE_DIR/src; only files whose bytes changed are rewritten, so an unchanged tree rebuilds nothing.
#   build    `pip install` of that copy into the venv by the arm64 Python, as a user's would build it: setup.py
#            decides the sources and flags; the compiler is aarch64-linux-gnu-gcc, the CC that the arm64
#            Python's sysconfig names.  Skipped when the package's files are those of the last install.
#   test     the test subset marked `emulation` (tests/conftest.py says which tests and why), run by pytest under
#            qemu from outside the source tree, against the installed package.
#   compare  (when COMPARE_PYTHON names an x86 Python with pyconvtbc installed) the SHA-256 of every case of the
#            NaN-contract grid (tests/nan_grid.py: NaN / Inf / subnormal inputs, both operators) from the aarch64
#            build and from that Python's x86 build: they must be equal case by case.
#
# Writes only under CACHE_DIR, apart from the apt packages, dpkg's architecture list and the binfmt_misc entry.
# Delete CACHE_DIR to start over.  Times on a 2-core AMD EPYC (Zen 4) shared with other jobs (load average about
# 8), 2026-12-06: without the apt packages and with an empty CACHE_DIR 845 s (apt 30, sysroot 23, venv 114,
# deps 98, build 141, test 406, compare 30); a rerun with nothing changed spends 5-7 s before the tests (at
# load average 2.5: test 258 s, compare 15 s); a rebuild after a kernel header change 54-88 s.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${1:-${PYCONVTBC_AARCH64_CACHE:-$HOME/.cache/pyconvtbc-aarch64}}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
SYSROOT=$CACHE/sysroot
VENV=$CACHE/venv
SRC=$CACHE/src
STEPS=${STEPS:-"apt binfmt sysroot venv deps src build test compare"}
# Wheels only: a source build of any of these under emulation would take an hour.
PYDEPS="numpy>=2 ml_dtypes>=0.4 cython>=3 setuptools>=77 pytest>=7 hypothesis>=6"
TEST_TIMEOUT=${TEST_TIMEOUT:-1500}

export QEMU_LD_PREFIX=$SYSROOT             # where qemu-aarch64 finds the arm64 loader and shared libraries
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_CACHE_DIR=$CACHE/pip PIP_NO_INPUT=1

log() { printf 'aarch64: [%s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
want() { [[ " $STEPS " == *" $1 "* ]]; }
as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"
    elif command -v sudo > /dev/null; then sudo "$@"
    else die "'$*' needs root (or sudo)"; fi
}
binfmt_ok() { grep -qs '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64; }

step_apt() {
    local need=() p
    # (libc6-dev-arm64-cross, the arm64 C library's headers and start files, is only a Recommends of the compiler)
    for p in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static; do
        dpkg -s "$p" > /dev/null 2>&1 || need+=("$p")
    done
    local update=0
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        as_root dpkg --add-architecture arm64
        update=1
    fi
    # the arm64 package lists: absent until an update after --add-architecture
    apt-cache show python3.11-minimal:arm64 > /dev/null 2>&1 || update=1
    [[ ${#need[@]} -eq 0 ]] || update=1
    if [[ $update -eq 1 ]]; then as_root apt-get update -q; fi
    if [[ ${#need[@]} -gt 0 ]]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
    fi
    log "apt: $(aarch64-linux-gnu-gcc --version | head -1); $(qemu-aarch64-static --version | head -1)"
}

step_binfmt() {
    if binfmt_ok; then log "binfmt: qemu-aarch64 registered"; return; fi
    if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
        as_root mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || true
    fi
    local rule=/usr/lib/binfmt.d/qemu-aarch64.conf     # Debian's rule; flag F: the interpreter is opened now
    if [[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
        echo 1 | as_root tee /proc/sys/fs/binfmt_misc/qemu-aarch64 > /dev/null
    elif [[ -e /proc/sys/fs/binfmt_misc/register && -r $rule ]]; then
        as_root sh -c "cat '$rule' > /proc/sys/fs/binfmt_misc/register"
    fi
    # Without it pip cannot start its build backend and setup.py's OpenMP probe cannot run: no fallback that
    # would quietly test another build than users get.
    binfmt_ok || die "binfmt_misc: qemu-aarch64 cannot be registered here (a container without binfmt_misc?)"
    log "binfmt: qemu-aarch64 registered"
}

# The arm64 packages the interpreter, pip and the built module load (the Depends closure of python3.11,
# python3.11-venv and libgomp1 in Debian 12), and libpython3.11-dev for Python.h and aarch64's pyconfig.h.
A64_DEBS="libc6 libgcc-s1 gcc-12-base libstdc++6 libgomp1 zlib1g libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5
libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1 libdb5.3 libcrypt1 libnsl2 libtirpc3 libgssapi-krb5-2
libkrb5-3 libk5crypto3 libcom-err2 libkrb5support0 libkeyutils1 libzstd1 libmd0 libselinux1 libpcre2-8-0
libpython3.11-minimal libpython3.11-stdlib libpython3.11 libpython3.11-dev python3.11-minimal python3.11
python3.11-venv"
ALL_DEBS="python3-pip-whl python3-setuptools-whl media-types"

step_sysroot() {
    local want_list p
    want_list=$(printf '%s\n' $A64_DEBS $ALL_DEBS | sort | tr '\n' ' ')
    if [[ -f $SYSROOT/.complete && $(cat "$SYSROOT/.complete") == "$want_list" ]]; then
        log "sysroot: present"; return
    fi
    rm -rf "$SYSROOT"
    mkdir -p "$CACHE/debs" "$SYSROOT"
    local list=()
    for p in $A64_DEBS; do list+=("$p:arm64"); done
    list+=($ALL_DEBS)
    # apt-get download skips nothing by itself: fetch only the packages with no .deb in the cache yet
    local missing=()
    for p in "${list[@]}"; do
        local name=${p%%:*} arch=all
        [[ $p == *:arm64 ]] && arch=arm64
        compgen -G "$CACHE/debs/${name}_*_${arch}.deb" > /dev/null || missing+=("$p")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
        # (as root, apt warns that _apt cannot write here and downloads unsandboxed: harmless)
        (cd "$CACHE/debs" && apt-get download -q "${missing[@]}" 2>&1 |
            grep -v -e '^W: Download is performed unsandboxed' -e '^Get:' || true)
    fi
    for p in "${list[@]}"; do
        local name=${p%%:*} arch=all
        [[ $p == *:arm64 ]] && arch=arm64
        local deb
        deb=$(ls -t "$CACHE/debs/${name}"_*_"${arch}".deb 2> /dev/null | head -1)
        [[ -n $deb ]] || die "sysroot: $p was not downloaded"
        dpkg-deb -x "$deb" "$SYSROOT"
    done
    "$SYSROOT/usr/bin/python3.11" -c 'import platform, ssl, ctypes; assert platform.machine() == "aarch64"'
    echo "$want_list" > "$SYSROOT/.complete"
    log "sysroot: $(du -sh "$SYSROOT" | cut -f1) from ${#list[@]} packages"
}

step_venv() {
    if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -m pip --version > /dev/null 2>&1; then
        log "venv: present"; return
    fi
    rm -rf "$VENV" "$CACHE/installed.sha256"
    "$SYSROOT/usr/bin/python3.11" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
}

step_deps() {
    local stamp=$VENV/.pyconvtbc-deps
    if [[ -f $stamp && $(cat "$stamp") == "$PYDEPS" ]]; then log "deps: present"; return; fi
    # shellcheck disable=SC2086
    "$VENV/bin/python" -m pip install -q --only-binary=:all: $PYDEPS
    echo "$PYDEPS" > "$stamp"
    "$VENV/bin/python" -c 'import numpy, ml_dtypes, Cython, platform
print("aarch64: deps on", platform.machine(), "numpy", numpy.__version__, "ml_dtypes", ml_dtypes.__version__,
      "Cython", Cython.__version__)'
}

step_src() {
    # The files `git status` would show (tracked, and untracked but not ignored), byte-compared so that unchanged
    # files keep their times and setuptools / Cython rebuild only what changed; files dropped since the last
    # run are removed.  Build outputs (build/, the generated .c) stay between runs.
    mkdir -p "$SRC"
    local now=$CACHE/src-files.txt
    (cd "$REPO" && git ls-files -co --exclude-standard | LC_ALL=C sort) > "$now.new"
    local f changed=0
    while IFS= read -r f; do
        [[ -f $REPO/$f ]] || continue          # deleted in the work tree, not yet in git
        if ! cmp -s "$REPO/$f" "$SRC/$f"; then
            mkdir -p "$(dirname "$SRC/$f")"
            cp -p "$REPO/$f" "$SRC/$f"
            changed=$((changed + 1))
        fi
    done < "$now.new"
    if [[ -f $now ]]; then
        LC_ALL=C comm -23 "$now" "$now.new" | while IFS= read -r f; do rm -f "$SRC/$f"; done
    fi
    mv "$now.new" "$now"
    log "src: $(wc -l < "$now") files, $changed copied"
}

build_inputs_hash() {  # what the built package depends on: the package's files and the build files
    (cd "$SRC" && grep -E '^(pyconvtbc/|setup.py$|pyproject.toml$|MANIFEST.in$)' "$CACHE/src-files.txt" |
        tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

step_build() {
    # pip installs the copy as it would for a user (setup.py: sources, flags, the OpenMP probe); the arm64
    # Python's sysconfig names CC=aarch64-linux-gnu-gcc, an x86-64 program.  The emulated Python sees the
    # sysroot as / (qemu's QEMU_LD_PREFIX lookup), so the include directory it names is /usr/include/python3.11,
    # a host path: the sysroot's Python.h and its aarch64 pyconfig.h (<aarch64-linux-gnu/python3.11/pyconfig.h>)
    # come first through CFLAGS.  The build folder stays in the copy, so only what changed is recompiled, and
    # nothing at all (not even pip, slow under emulation) when the package's files are those last installed.
    local stamp=$CACHE/installed.sha256 want
    want=$(build_inputs_hash)
    if [[ -f $stamp && $(cat "$stamp") == "$want" ]]; then log "build: installed package up to date"; return; fi
    rm -f "$stamp"
    local rc=0
    (cd "$SRC" && CFLAGS="-I$SYSROOT/usr/include/python3.11 -I$SYSROOT/usr/include" "$VENV/bin/python" -m pip \
        install -v --no-build-isolation --no-deps --force-reinstall .) > "$CACHE/build.log" 2>&1 || rc=$?
    if [[ $rc -ne 0 ]]; then tail -40 "$CACHE/build.log"; die "build failed (log: $CACHE/build.log)"; fi
    grep -E "pyconvtbc: |(error|warning): " "$CACHE/build.log" | grep -v "byte-compiling is disabled" >&2 || true
    grep -q "pyconvtbc: building with OpenMP on" "$CACHE/build.log" || die "the aarch64 build has no OpenMP"
    (cd "$CACHE" && "$VENV/bin/python" -c '
import platform
from pyconvtbc._kernels import _conv_tbc as m, _openmp as o
assert platform.machine() == "aarch64" and o.have_openmp(), (platform.machine(), o.have_openmp())
print("aarch64: built", m.__file__, "isa", m.isa(), "openmp", o.have_openmp())')
    echo "$want" > "$stamp"
}

step_test() {
    # From a directory with no pyconvtbc/ in it: the installed package is what is tested.  The subset is the
    # `emulation` marker (tests/conftest.py); "not slow" as everywhere under emulation.
    mkdir -p "$CACHE/run"
    cd "$CACHE/run"
    local rc=0 extra=()
    eval "extra=(${PYTEST_ARGS:-})"                  # shell words: PYTEST_ARGS="-k 'narrow and not hif8'" works
    PYCONVTBC_EXPECT_INSTALLED=1 timeout "$TEST_TIMEOUT" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
        -c "$SRC/pyproject.toml" --rootdir "$SRC" -m "emulation and not slow" "${extra[@]}" "$SRC/tests" || rc=$?
    [[ $rc -ne 5 ]] || log "pytest collected no tests"
    return "$rc"
}

step_compare() {
    if [[ -z ${COMPARE_PYTHON:-} ]]; then log "compare: skipped (no COMPARE_PYTHON)"; return; fi
    mkdir -p "$CACHE/run"
    cd "$CACHE/run"                                  # outside any source tree: the installed packages
    "$COMPARE_PYTHON" "$SRC/tests/nan_grid.py" --digest "$CACHE/digest-x86_64.txt" || return 1
    "$VENV/bin/python" "$SRC/tests/nan_grid.py" --digest "$CACHE/digest-aarch64.txt" || return 1
    local n bad
    n=$(wc -l < "$CACHE/digest-x86_64.txt")
    bad=$(diff "$CACHE/digest-x86_64.txt" "$CACHE/digest-aarch64.txt" | grep -c '^<' || true)
    if [[ $bad -ne 0 ]]; then
        diff "$CACHE/digest-x86_64.txt" "$CACHE/digest-aarch64.txt" | grep '^<' | head -5 >&2
        log "compare: $bad of $n cases differ between x86-64 and aarch64 ($CACHE/digest-*.txt)"
        return 1
    fi
    log "compare: all $n cases bit-identical between x86-64 and aarch64"
}

t_all=$SECONDS
failed=()
for s in apt binfmt sysroot venv deps src build test compare; do
    if want "$s"; then
        t0=$SECONDS
        case $s in
            test | compare) "step_$s" || failed+=("$s") ;;    # both run, whichever fails
            *) "step_$s" ;;                                    # the set-up steps stop the script on failure
        esac
        log "step $s: $((SECONDS - t0)) s"
    fi
done
if [[ ${#failed[@]} -gt 0 ]]; then log "FAILED: ${failed[*]} (in $((SECONDS - t_all)) s)"; exit 1; fi
log "done in $((SECONDS - t_all)) s"
