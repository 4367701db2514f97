"""lookalike.memory: freed score blocks go back to the system inside the scoring loops, and only there."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

LIB = Path(__file__).resolve().parents[1] / "lib"
GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# a 16 MiB mapped block freed (glibc's threshold climbs to it), then 50 blocks of 4 MiB each with a
# small object allocated after it, then the big blocks freed: on the heap the small ones pin them
SCENARIO = """
import sys
sys.path.insert(0, {lib!r})
{before}
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20
def churn():
    big = bytearray(16 << 20)
    del big
    base = rss()
    blocks, pins = [], []
    for _ in range(50):
        blocks.append(bytearray(4 << 20))
        pins.append(bytearray(2000))
    del blocks
    return rss() - base
{measure}
"""


def _held_mib(before: str = "", measure: str = "print(churn())") -> float:
    out = subprocess.run([sys.executable, "-c", SCENARIO.format(lib=str(LIB), before=before, measure=measure)],
                         capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_freed_blocks_go_back_to_the_system_inside_the_loop_and_only_there():
    assert _held_mib() > 150                 # glibc's own policy keeps the 200 MiB freed
    inside = "from lookalike import memory\nwith memory.returning_freed_blocks() as fixed:\n    assert fixed\n    print(churn())"
    assert _held_mib(measure=inside) < 20
    # nested loops: the inner one's end leaves the outer one's setting in force
    nested = ("from lookalike import memory\nwith memory.returning_freed_blocks():\n"
              "    with memory.returning_freed_blocks():\n        pass\n    print(churn())")
    assert _held_mib(measure=nested) < 20
    # after the loop, large temporaries come from the heap again (mapping each afresh slows everything else)
    after = "from lookalike import memory\nwith memory.returning_freed_blocks():\n    pass\nprint(churn())"
    assert _held_mib(measure=after) > 150


# whether a fresh 4 MiB block is mapped on its own: glibc's mallinfo2 counts the bytes in mapped blocks
MAPPED = """
import ctypes, sys
sys.path.insert(0, {lib!r})
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
big = bytearray(16 << 20)       # glibc's own policy: freeing it lifts the threshold to 16 MiB
del big
{before}
held = libc.mallinfo2().hblkhd
block = bytearray(4 << 20)
print(libc.mallinfo2().hblkhd - held >= 4 << 20)
"""


def _mapped(before: str) -> bool:
    out = subprocess.run([sys.executable, "-c", MAPPED.format(lib=str(LIB), before=before)], capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


@pytest.mark.skipif(not GLIBC or tuple(map(int, platform.libc_ver()[1].split(".")[:2])) < (2, 33),
                    reason="glibc 2.33 or later (mallinfo2)")
def test_a_stage_context_leaves_glibcs_own_policy_in_force(tmp_path):
    """Every stage used to fix the threshold for its whole process, which slowed the encoders and every
    test worker that made a stage context: a 4 MiB block was mapped afresh each time."""
    assert not _mapped("")
    assert _mapped("from lookalike import memory\nloop = memory.returning_freed_blocks()\nloop.__enter__()")
    assert not _mapped(f"from lookalike import stages\nstages.context({str(tmp_path)!r})")


def test_the_whole_corpus_scoring_loops_score_inside_it():
    """Each loop that scores block after block against every unit scores inside returning_freed_blocks."""
    from lookalike import memory
    from lookalike.analysis import negatives
    from lookalike.retrieval import indexes
    from lookalike.retrieval.encoders import appearance

    rng = np.random.default_rng(0)
    units, qids = [f"u{i}" for i in range(50)], [f"q{i}" for i in range(7)]
    scores = rng.random((len(qids), len(units)))
    inside = []

    def score_rows(rows):
        inside.append(memory._depth > 0)
        return scores[list(rows)]

    indexes.run_from_scorer(score_rows, qids, units, k=5)
    negatives.top1_outcomes(score_rows, units, qids, {q: {units[i]} for i, q in enumerate(qids)}, {"corpus": {}})
    assert inside and all(inside)

    class Vectors(np.ndarray):
        def __matmul__(self, other):
            inside.append(memory._depth > 0)
            return np.asarray(self) @ np.asarray(other)

    inside.clear()
    appearance.same_template_neighbour_rate(rng.random((20, 4)).view(Vectors), ["a", "b"] * 10)
    assert inside and all(inside)
    assert memory._depth == 0
