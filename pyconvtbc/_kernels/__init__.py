"""Compiled kernels (Cython).  Nothing here is public API; see pyconvtbc/__init__.py.

Importing this package checks that the extensions are built: a source checkout that was never built (or a
source tree that shadows the installed package because Python runs from the repository root) fails here with
an ImportError that says so and how to fix it, instead of a bare "No module named ..._openmp".
"""
import importlib as _importlib
import os as _os

try:
    _importlib.import_module(__name__ + "._openmp")   # the compiled module every import path needs first
except ImportError as _exc:
    import importlib.machinery as _machinery
    import sys as _sys

    _here = _os.path.dirname(_os.path.abspath(__file__))
    _built = any(_os.path.exists(_os.path.join(_here, "_openmp" + s)) for s in _machinery.EXTENSION_SUFFIXES)
    if _built:
        _what = (f"pyconvtbc's compiled extensions in {_here!r} do not load ({_exc}). Check that they were built "
                 f"for this Python ({_sys.implementation.cache_tag}) and that the OpenMP runtime (libgomp) is "
                 "installed; rebuild with pip install -e . (a checkout) or reinstall the package.")
    else:
        _tree = _os.path.dirname(_os.path.dirname(_here))
        _what = (f"pyconvtbc is being imported from its source tree {_tree!r}, whose Cython extensions are not "
                 "built.\nIf you installed pyconvtbc (pip install . or a wheel), run Python from another "
                 "directory: the source tree in the current directory shadows the installed package.\n"
                 "To use the source tree itself, build it in place there: pip install -e . "
                 "(or python setup.py build_ext --inplace).")
    raise ImportError(_what) from None
