"""Compiled kernels (Cython).  Nothing here is public API; see pyconvtbc/__init__.py."""
