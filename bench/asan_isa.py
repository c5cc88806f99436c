"""pytest plugin for memory-checker runs: pin the kernels' code path (ASAN_ISA: one of
``pyconvtbc._kernels._conv_tbc.isas()``, e.g. portable, avx2, avx512) before every test, so that each path runs
the whole suite (tests that choose a path themselves still do)."""
import os

import pytest


@pytest.fixture(autouse=True)
def _pin_isa():
    from pyconvtbc._kernels import _conv_tbc
    isa = os.environ.get("ASAN_ISA")
    if isa:
        _conv_tbc.hooks.set(isa=isa)
    yield
