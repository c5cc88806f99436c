"""The memory limit follows containers (docs/reliability.md, "Memory limit"): the cgroup's limit (v2 memory.max,
v1 memory.limit_in_bytes) and what is available now (MemAvailable, the cgroup's limit less its working set), not
only the physical memory.

Before, memory_limit() was the physical memory alone: in a container a request between the cgroup's limit and
the machine's memory was accepted, and the process OOM-killed when it wrote the pages, instead of a 161002 /
200000 status at once.
"""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import memory

GiB = 1 << 30


def _tree(tmp_path, cgroup_line, files):
    tmp_path.mkdir(parents=True, exist_ok=True)
    proc = tmp_path / "cgroup"
    proc.write_text(cgroup_line)
    root = tmp_path / "sys"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(proc), str(root)


def test_cgroup_v2_limit_and_working_set(tmp_path):
    proc, root = _tree(tmp_path, "0::/user.slice/app\n", {
        "user.slice/app/memory.max": "1073741824\n", "user.slice/app/memory.current": "536870912\n",
        "user.slice/app/memory.stat": "anon 4096\ninactive_file 134217728\nactive_file 1\n",
        "user.slice/memory.max": "max\n", "memory.max": "max\n"})
    assert memory.cgroup_memory(proc, root) == (GiB, 512 * 2**20 - 128 * 2**20)


def test_cgroup_v1_limit_and_usage(tmp_path):
    proc, root = _tree(tmp_path, "5:cpu,cpuacct:/\n4:memory:/docker/abc\n0::/\n", {
        "memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
        "memory/docker/abc/memory.usage_in_bytes": "1073741824\n",
        "memory/docker/abc/memory.stat": "cache 5\ntotal_inactive_file 0\n",
        "memory/memory.limit_in_bytes": "9223372036854771712\n"})          # v1's "no limit"
    assert memory.cgroup_memory(proc, root) == (2 * GiB, GiB)


def test_the_tightest_ancestor_wins_and_missing_groups_are_skipped(tmp_path):
    proc, root = _tree(tmp_path, "0::/a/b/c\n", {      # a/b/c is not there (another cgroup namespace)
        "a/b/memory.max": str(4 * GiB), "a/b/memory.current": str(GiB),
        "a/memory.max": str(2 * GiB), "a/memory.current": str(GiB // 2)})
    assert memory.cgroup_memory(proc, root) == (2 * GiB, GiB // 2)
    proc, root = _tree(tmp_path / "ns", "0::/\n", {"memory.max": str(3 * GiB), "memory.current": "0"})
    assert memory.cgroup_memory(proc, root) == (3 * GiB, 0)
    assert memory.cgroup_memory(str(tmp_path / "none"), root) == (None, None)


def test_available_is_memavailable_and_the_cgroups_headroom(tmp_path, monkeypatch):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24683784 kB\nMemFree:  100 kB\nMemAvailable:    1024 kB\n")
    monkeypatch.setattr(memory, "cgroup_memory", lambda: (None, None))
    assert memory.memory_available(str(info)) == 1 << 20
    monkeypatch.setattr(memory, "cgroup_memory", lambda: (GiB, GiB - 4096))
    assert memory.memory_available(str(info)) == 4096
    assert memory.memory_available(str(tmp_path / "missing")) == 4096


@pytest.fixture
def container(monkeypatch):
    """A cgroup limit of 4 GiB with 3 GiB in use (1 GiB free), well below this machine's memory."""
    monkeypatch.setattr(memory, "cgroup_memory", lambda *a: (4 * GiB, 3 * GiB))
    memory.memory_total.cache_clear()
    yield
    monkeypatch.undo()
    memory.memory_total.cache_clear()


def test_a_request_between_the_cgroup_limit_and_physical_memory_is_refused(container):
    assert memory.memory_total() == min(4 * GiB, memory._physical())
    assert memory.memory_limit() <= GiB
    rc, p = pc.aclrtMalloc(2 * GiB)                     # fits the machine, not the container's headroom
    assert rc == pc.ACL_ERROR_BAD_ALLOC and p is None
    assert "available now" in pc.aclGetRecentErrMsg() and "MemAvailable" in pc.aclGetRecentErrMsg()
    rc, p = pc.aclrtMalloc(5 * GiB)                     # past the cgroup's limit itself
    assert rc == pc.ACL_ERROR_BAD_ALLOC and f"at most {4 * GiB} bytes in all" in pc.aclGetRecentErrMsg()
    rc, p = pc.aclrtMalloc(1 << 20)
    assert rc == 0 and pc.aclrtFree(p) == 0
    # the NumPy layer: a 1 GiB output and about as much workspace (a broadcast input costs nothing): within the
    # cgroup's limit, beyond its headroom: refused before computing
    x = np.broadcast_to(np.zeros((1, 1, 4), np.float32), (1 << 26, 1, 4))
    w = np.zeros((1, 4, 4), np.float32)
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(x, x, w, np.zeros(4, np.float32), 0)
    assert e.value.status == 161002 and "available now" in e.value.message
