"""Where schedbe places a synchronous wakeup (crates/schedbe/src/bpf/lc_place.bpf.h,
sync_unstack()).

A pipe ping-pong pair whose two tasks last ran on one CPU: the kernel's
default CPU picker sends a synchronous wakee to its waker's CPU while any CPU
idles, so left to it the pair would share that CPU for good (nothing in
sched_ext pulls a task out of a local queue; EEVDF's idle balance would, and
its wakeup path prefers an idle CPU to a busy waker's). schedbe sends the
wakee to an idle CPU once; from then on each task wakes on its own idle CPU.

The figures are the kernel's, which schedbe does not write: each task's CPU
from /proc/PID/stat (the one it last ran on), sampled, and its migrations
(se.nr_migrations in /proc/PID/sched). Before sync_unstack() the pair stayed
on CPU 1 in every sample; the test failed there.
"""

import os
import re
import time
import types
from pathlib import Path

import pytest

import schedbe_testlib as tl

pytestmark = pytest.mark.vm

CG = f"{tl.TEST_CG}/place"
# Two processes passing a byte back and forth over two pipes: each read blocks,
# and each write wakes the other with WF_SYNC (pipe_write).
PINGPONG = """
import os
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
if os.fork() == 0:
    while True:
        os.read(a_r, 1); os.write(b_w, b"x")
while True:
    os.write(a_w, b"x"); os.read(b_r, 1)
"""
WINDOW = 4.0


def last_cpu(pid):
    # field 39, counted after the command's closing parenthesis (it may hold spaces)
    rest = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(rest[36])


def trips_of(pid):
    """Round trips so far: each is one voluntary switch (a blocking read)."""
    return tl.ctxt_switches(types.SimpleNamespace(pid=pid))[0]


def migrations(pid):
    m = re.search(r"^se\.nr_migrations\s*:\s*(\d+)", Path(f"/proc/{pid}/sched").read_text(), re.M)
    return int(m.group(1))


@pytest.mark.skipif(tl.NR_CPUS < 3, reason="needs CPUs 1 and 2 for the pair, the harness on CPU 0")
def test_sync_pair_on_one_cpu_spreads_to_two_idle_cpus():
    """The pair starts pinned to CPU 1, then may use CPUs 1 and 2, which are
    otherwise idle (the test samples from CPU 0). Over the next WINDOW s the
    two must be on different CPUs in at least 80% of the samples, and each
    must migrate at most once per 50 of its round trips: spread once, not
    bounced between the CPUs at every message."""
    tl.cg_create(CG)
    mine = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {0})
    p = None
    try:
        with tl.Schedbe(name="sync-place"):
            p = tl.spawn(["python3", "-c", PINGPONG], cgroup=CG, cpus=[1])
            child = tl.wait_for(lambda: (tl.children(p.pid) or [None])[0], 20, what="the pair's second process")
            pair = [p.pid, child]
            for pid in pair:
                os.sched_setaffinity(pid, [1])
            tl.wait_for(lambda: all(trips_of(pid) > 200 for pid in pair), 30,
                        what="the pair exchanging messages on CPU 1")
            assert [last_cpu(pid) for pid in pair] == [1, 1]
            trips0 = [trips_of(pid) for pid in pair]
            mig0 = [migrations(pid) for pid in pair]
            for pid in pair:
                os.sched_setaffinity(pid, [1, 2])
            apart = samples = 0
            end = time.monotonic() + WINDOW
            while time.monotonic() < end:
                cpus = [last_cpu(pid) for pid in pair]
                apart += cpus[0] != cpus[1]
                samples += 1
                time.sleep(0.02)
            trips = [trips_of(pid) - t for pid, t in zip(pair, trips0)]
            migs = [migrations(pid) - m for pid, m in zip(pair, mig0)]
            tl.log(f"sync pair: apart in {apart}/{samples} samples; round trips {trips}; migrations {migs}")
            assert min(trips) >= 100, f"the pair hardly ran ({trips} round trips in {WINDOW} s)"
            assert apart >= 0.8 * samples, \
                f"the pair shared a CPU in {samples - apart} of {samples} samples (migrations {migs})"
            assert all(m <= 1 + t / 50 for m, t in zip(migs, trips)), \
                f"the pair bounced between CPUs: migrations {migs} for round trips {trips}"
    finally:
        if p is not None:
            tl.kill_proc(p)
        os.sched_setaffinity(0, mine)
