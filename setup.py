"""Build script: the Cython extensions, with OpenMP when the compiler supports it.

Every compiler flag lives here, in one place.  There is no ``-march=native``: the kernels pick
their vector code at run time (see ``pyconvtbc/_kernels``), so a wheel built here runs on any x86-64.

Environment:
  PYCONVTBC_DISABLE_OPENMP=1   build the serial fallback even if the compiler has OpenMP
  PYCONVTBC_SANITIZE=address   build with AddressSanitizer (see docs/developer.md)
  PYCONVTBC_KEEP_DEBUG=1       keep the debug info (release builds are compiled with -g0 and linked stripped)
  PYCONVTBC_ONLY=a,b            build only these extension modules (developer convenience)
  PYCONVTBC_BUILD_JOBS=N        compiler processes at once (default: one per usable CPU)

Generated sources: every ``pyconvtbc/_kernels/*.pyx.tp`` (a Tempita template, Tempita ships with Cython) is
rendered into the ``.pyx`` beside it before Cython runs; that ``.pyx`` is a build output (.gitignore).
"""
import concurrent.futures
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import numpy
from Cython.Build import cythonize
from Cython.Tempita import Template
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# IEEE semantics are part of the results: no fast-math (which would also link crtfastmath.o, switching the whole
# process to flush-to-zero), no contraction of a*b + c into an FMA that the source does not write.
IEEE_ARGS = ["-fno-fast-math", "-fno-unsafe-math-optimizations", "-ffp-contract=off"]
BASE_COMPILE_ARGS = ["-O3", "-fno-strict-aliasing", "-fno-math-errno", "-std=gnu11"] + IEEE_ARGS
BASE_LINK_ARGS = ["-fno-fast-math", "-fno-unsafe-math-optimizations"]
# Flags from CFLAGS / LDFLAGS / CC that would change results; dropped from the compiler's command lines (the
# flags above cannot undo -Ofast's link of crtfastmath.o).
UNSAFE_FLAGS = ("-Ofast", "-ffast-math", "-funsafe-math-optimizations", "-ffinite-math-only", "-fno-signed-zeros",
                "-fassociative-math", "-freciprocal-math", "-fno-trapping-math", "-ffp-contract=fast",
                "-fcx-limited-range", "-mdaz-ftz")


def _drop_unsafe_flags(compiler):
    """Remove UNSAFE_FLAGS from the compiler's command lines (unixccompiler keeps them as lists); returns what
    was dropped."""
    dropped = []
    for attr in ("compiler_so", "compiler", "compiler_cxx", "linker_so", "linker_exe"):
        cmd = getattr(compiler, attr, None)
        if isinstance(cmd, list):
            kept = [a for a in cmd if a not in UNSAFE_FLAGS]
            dropped += [a for a in cmd if a in UNSAFE_FLAGS and a not in dropped]
            setattr(compiler, attr, kept)
    return dropped


def _release_flags(sanitize):
    """(compile, link) flags that keep debug info out of a release build: it is 85% of the extensions (10.6 MB
    with it, 1.5 MB without; the wheel 3.7 MB, 0.7 MB).  None for a sanitizer build or with PYCONVTBC_KEEP_DEBUG=1."""
    if sanitize or os.environ.get("PYCONVTBC_KEEP_DEBUG", "") not in ("", "0"):
        return [], []
    return ["-g0"], ["-Wl,--strip-debug"]


def _announce_compile(n_modules):
    """Say that the C kernels are being compiled and for how long, on stderr and, when pip has captured stderr
    (it shows only a spinner), on the terminal too."""
    modules = f"{n_modules} extension module{'s' if n_modules != 1 else ''}"
    msg = (f"pyconvtbc: compiling the C kernels ({modules}); this usually takes 1-3 minutes (about 1 on 2 cores "
           "of a recent x86-64), during which pip shows only its spinner (pip -v shows the compiler)\n")
    sys.stderr.write(msg)
    sys.stderr.flush()
    if sys.stderr.isatty():
        return
    try:
        with open("/dev/tty", "w") as tty:
            tty.write("\n" + msg)
    except OSError:  # no controlling terminal (CI, a service): stderr only
        pass


OPENMP_FLAG = "-fopenmp"

_PROBE = r"""
#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return n > 0 ? 0 : 1;
}
"""


def _compiler_has_openmp(compiler) -> bool:
    """Compile and link a tiny OpenMP program with the compiler setuptools will use."""
    if os.environ.get("PYCONVTBC_DISABLE_OPENMP", "") not in ("", "0"):
        return False
    tmp = tempfile.mkdtemp(prefix="pyconvtbc_omp_")
    try:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write(_PROBE)
        objs = compiler.compile([src], output_dir=tmp, extra_postargs=[OPENMP_FLAG])
        compiler.link_executable(objs, "probe", output_dir=tmp, extra_postargs=[OPENMP_FLAG])
        return subprocess.call([os.path.join(tmp, "probe")]) == 0
    except Exception:  # any failure means: no usable OpenMP
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_jobs() -> int:
    """Compiler processes at once: $PYCONVTBC_BUILD_JOBS, else one per CPU this process may use."""
    env = os.environ.get("PYCONVTBC_BUILD_JOBS", "")
    if env.strip():
        return max(1, int(env))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _compile_in_parallel(compiler, jobs):
    """Make compiler.compile run one compiler process per source, ``jobs`` at once (the objects keep the
    sources' order).  An extension of several translation units (the kernel room's ISA files) then builds on
    every core; extensions themselves build in parallel too (build_ext.parallel)."""
    serial = compiler.compile

    def compile(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                extra_postargs=None, depends=None):
        args = (output_dir, macros, include_dirs, debug, extra_preargs, extra_postargs, depends)
        if jobs <= 1 or len(sources) <= 1:
            return serial(sources, *args)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            parts = list(pool.map(lambda src: serial([src], *args), sources))
        return [obj for part in parts for obj in part]

    compiler.compile = compile


class BuildExt(build_ext):
    def finalize_options(self):
        super().finalize_options()
        if not self.parallel:
            self.parallel = _build_jobs()

    def build_extensions(self):
        _announce_compile(len(self.extensions))
        dropped = _drop_unsafe_flags(self.compiler)
        if dropped:
            sys.stderr.write(f"pyconvtbc: ignoring {' '.join(dropped)} from the environment: the emulation needs IEEE "
                             "arithmetic\n")
        use_omp = _compiler_has_openmp(self.compiler)
        sanitize = os.environ.get("PYCONVTBC_SANITIZE", "")
        compile_args = list(BASE_COMPILE_ARGS)
        link_args = list(BASE_LINK_ARGS)
        if use_omp:
            compile_args.append(OPENMP_FLAG)
            link_args.append(OPENMP_FLAG)
        if sanitize:
            compile_args += [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer", "-g", "-O1"]
            link_args += [f"-fsanitize={sanitize}"]
        release_compile, release_link = _release_flags(sanitize)
        compile_args += release_compile
        link_args += release_link
        sys.stderr.write(f"pyconvtbc: building with OpenMP {'on' if use_omp else 'off (serial fallback)'}\n")
        for ext in self.extensions:
            ext.extra_compile_args = compile_args + list(ext.extra_compile_args or [])
            ext.extra_link_args = link_args + list(ext.extra_link_args or [])
        # Objects built with other flags (a sanitizer build, or a normal one after it, or other CC / CFLAGS) are never
        # reused: setuptools compares only file times, so without this a build could copy the other kind's module
        # in place.
        stamp = os.path.join(self.build_temp, "pyconvtbc-flags.txt")
        flags = "\n".join(compile_args + ["--"] + link_args + ["--"]
                          + [" ".join(getattr(self.compiler, a, None) or []) for a in ("compiler_so", "linker_so")])
        try:
            with open(stamp, encoding="utf-8") as f:
                same = f.read() == flags
        except OSError:
            same = False
        if not same:
            self.force = True
        self._flags = flags
        _compile_in_parallel(self.compiler, _build_jobs())
        super().build_extensions()
        os.makedirs(self.build_temp, exist_ok=True)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(flags)

    # An editable install (pip install -e) builds in fresh temporary folders every time, so setuptools' own
    # up-to-date check never holds there and a second `pip install -e` in the same venv recompiled everything.  The
    # module built in place by the last editable build is reused instead when it is newer than every source and
    # header and was built with the same flags (recorded beside it in <module>.flags, git-ignored).
    def build_extension(self, ext):
        inplace = self._inplace_module(ext)
        if inplace and self._inplace_current(ext, inplace):
            target = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
            shutil.copyfile(inplace, target)
            sys.stderr.write(f"pyconvtbc: {os.path.basename(inplace)} is up to date (same sources and flags): reused\n")
            return
        super().build_extension(ext)
        if inplace:
            with open(inplace + ".flags", "w", encoding="utf-8") as f:
                f.write(self._flags)

    def _inplace_module(self, ext):
        """The in-place path of ext's module in an editable build (else None)."""
        if not getattr(self, "editable_mode", False):
            return None
        build_py = self.get_finalized_command("build_py")
        return self._get_inplace_equivalent(build_py, ext)[0]

    def _inplace_current(self, ext, inplace):
        try:
            with open(inplace + ".flags", encoding="utf-8") as f:
                if f.read() != self._flags:
                    return False
            built = os.path.getmtime(inplace)
        except OSError:
            return False
        return all(os.path.getmtime(src) <= built for src in list(ext.sources) + list(ext.depends or []))


KERNELS = os.path.join("pyconvtbc", "_kernels")
# The C translation units beside a module's .pyx: the kernel room's micro-kernel tables, one file per instruction
# set (pyconvtbc/_kernels/_ukr_<isa>.c) and the selector; they compile in parallel (BuildExt).
EXTRA_SOURCES = {"_conv_tbc": sorted(glob.glob(os.path.join(KERNELS, "_ukr_*.c")))}


def _render_templates():
    """Render each _kernels/*.pyx.tp into its .pyx; the file is rewritten only when its text changes (so an
    unchanged template does not make Cython rebuild the module)."""
    for tp in sorted(glob.glob(os.path.join(KERNELS, "*.pyx.tp"))):
        with open(tp, encoding="utf-8") as f:
            text = Template(f.read(), name=tp).substitute()
        pyx = tp[:-3]
        if os.path.exists(pyx):
            with open(pyx, encoding="utf-8") as f:
                if f.read() == text:
                    continue
        with open(pyx, "w", encoding="utf-8") as f:
            f.write(text)


def _c_is_current(pyx):
    """Whether Cython's C for ``pyx`` is newer than the project's own Cython sources (the .pyx and every .pxd beside
    it) and was made by this Cython.  cythonize alone would also compare with the .pxd files of the Cython it
    runs, which pip installs afresh for every isolated build: an editable reinstall then regenerated (and
    recompiled) every module."""
    import Cython
    c = pyx[:-4] + ".c"
    try:
        made = os.path.getmtime(c)
        with open(c, encoding="utf-8", errors="replace") as f:
            head = f.readline()
    except OSError:
        return False
    own = [pyx] + glob.glob(os.path.join(KERNELS, "*.pxd"))
    return f"Cython {Cython.__version__} " in head and all(os.path.getmtime(f) <= made for f in own)


def _extensions():
    _render_templates()
    exts, current = [], []
    only = [m for m in os.environ.get("PYCONVTBC_ONLY", "").split(",") if m]
    for pyx in sorted(glob.glob(os.path.join(KERNELS, "*.pyx"))):
        name = pyx[:-4].replace(os.sep, ".")
        if only and name.rsplit(".", 1)[-1] not in only:
            continue
        mod = name.rsplit(".", 1)[-1]
        keep = _c_is_current(pyx)
        (current if keep else exts).append(
            Extension(
                name,
                [pyx[:-4] + ".c" if keep else pyx] + EXTRA_SOURCES.get(mod, []),
                include_dirs=[numpy.get_include(), KERNELS],
                define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
                # the C headers the kernels include (_fpround.h, _fptables.h, _codes.h, _conv_gemm.h, ...):
                # an edit to one rebuilds the module
                depends=sorted(glob.glob(os.path.join(KERNELS, "*.h"))),
            )
        )
    return current + (cythonize(
        exts,
        language_level=3,
        compiler_directives={
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "initializedcheck": False,
        },
    ) if exts else [])


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
