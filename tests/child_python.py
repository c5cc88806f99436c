"""How a test starts a child Python that imports the same pyconvtbc as the test process.

The child gets the directory holding the imported package first on PYTHONPATH (a source checkout built in place,
or site-packages for an installed wheel) and runs from a directory without a ``pyconvtbc/`` in it: a child started
in an unbuilt source tree (the sdist the CI tests a wheel against) would import that tree and fail.
"""
import os
import tempfile
from pathlib import Path

import pyconvtbc

PACKAGE_PARENT = str(Path(pyconvtbc.__file__).resolve().parents[1])
# a neutral working directory: nothing named pyconvtbc in it
NEUTRAL_CWD = tempfile.gettempdir()


def child_env(base=None, **overrides):
    """os.environ (or ``base``) with ``overrides`` and PYTHONPATH led by the imported package's parent."""
    env = dict(os.environ if base is None else base)
    env.update(overrides)
    rest = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([PACKAGE_PARENT] + ([rest] if rest else []))
    return env
