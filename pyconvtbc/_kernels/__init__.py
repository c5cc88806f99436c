"""Compiled kernels (Cython).  Nothing here is public API; see pyconvtbc/__init__.py.

Importing this package checks that the extensions are built: a source checkout that was never built (or a
source tree that shadows the installed package because Python runs from the repository root) fails here with
an ImportError that says so and how to fix it, instead of a bare "No module named ..._openmp".
"""
import importlib as _importlib
import os as _os

_MODULES = ("_openmp", "_codecs", "_conv_tbc")   # _openmp first: every import path needs it

try:
    for _m in _MODULES:
        _importlib.import_module(__name__ + "." + _m)
except ImportError as _exc:
    import glob as _glob
    import importlib.machinery as _machinery
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _missing = [m for m in _MODULES
                if not any(_os.path.exists(_os.path.join(_here, m + s)) for s in _machinery.EXTENSION_SUFFIXES)]
    _others = sorted(_os.path.basename(f) for m in _MODULES
                     for f in _glob.glob(_os.path.join(_here, m + ".*")) if f.endswith((".so", ".pyd")))
    _rebuild = "rebuild with pip install -e . (a checkout) or reinstall the package."
    if _m not in _missing:      # the module that failed is there: it does not load
        _what = (f"pyconvtbc's compiled extensions in {_here!r} do not load ({_exc}). Check that they were built "
                 f"for this Python ({_sys.implementation.cache_tag}) and that the OpenMP runtime (libgomp) is "
                 f"installed; {_rebuild}")
    elif len(_missing) < len(_MODULES) or _others:
        _what = (f"pyconvtbc's compiled extensions in {_here!r} are incomplete for this Python "
                 f"({_sys.implementation.cache_tag}): {', '.join(_missing)} not built"
                 + (f" (found {', '.join(_others)}, built for another Python or a partial build)" if _others else "")
                 + f"; {_rebuild}")
    else:
        _tree = _os.path.dirname(_os.path.dirname(_here))
        _what = (f"pyconvtbc is being imported from its source tree {_tree!r}, whose Cython extensions are not "
                 "built.\nIf you installed pyconvtbc (pip install . or a wheel), run Python from another "
                 "directory: the source tree in the current directory shadows the installed package.\n"
                 "To use the source tree itself, build it in place there: pip install -e . "
                 "(or python setup.py build_ext --inplace).")
    raise ImportError(_what) from None
