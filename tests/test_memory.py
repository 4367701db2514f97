"""lookalike.memory: a stage's process hands freed blocks back to the system."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"

# a 16 MiB mapped block freed (glibc's threshold climbs to it), then 50 blocks of 4 MiB each with a
# small object allocated after it, then the big blocks freed: the small ones pin them in the heap
SCENARIO = """
import sys
sys.path.insert(0, {lib!r})
if {fixed}:
    from lookalike import memory
    assert memory.return_freed_blocks() and memory.return_freed_blocks()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
big = bytearray(16 << 20)
del big
base = rss()
blocks, pins = [], []
for _ in range(50):
    blocks.append(bytearray(4 << 20))
    pins.append(bytearray(2000))
del blocks
print(rss() - base)
"""


def _held_mib(fixed: bool) -> float:
    out = subprocess.run([sys.executable, "-c", SCENARIO.format(lib=str(LIB), fixed=fixed)], capture_output=True,
                         text=True, check=True)
    return float(out.stdout.strip())


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's allocator only")
def test_freed_blocks_go_back_to_the_system_under_the_stage_setting():
    assert _held_mib(False) > 150          # glibc's own policy keeps the 200 MiB freed
    assert _held_mib(True) < 20


def test_every_stage_context_sets_it(tmp_path, monkeypatch):
    from lookalike import memory, stages

    calls = []
    monkeypatch.setattr(memory, "return_freed_blocks", lambda: calls.append(1) or True)
    stages.context(tmp_path)
    assert calls == [1]
