"""Lock test for parking: an LC process and a BE process share a futex-based
mutex (a POSIX semaphore in shared memory, multiprocessing.Lock).

  lock_pair.py BE_CGROUP_DIR LC_CPU ROUNDS HOG_S CRIT_S

The BE child moves itself into BE_CGROUP_DIR and loops: take the lock, burn
CRIT_S of CPU inside it, release, pause 10 ms. The LC parent, pinned to
LC_CPU (every other CPU is kept busy by LC hogs the caller starts), repeats
ROUNDS times: pause 50 ms (the BE child runs on LC_CPU and takes the lock),
burn HOG_S on LC_CPU (the BE child is preempted inside its critical section,
starves, and gets parked holding the lock), then take the lock and time the
wait. Prints one JSON line per round: wait_s, and whether the BE cgroup was
frozen when the LC parent started waiting."""

import json
import multiprocessing as mp
import os
import sys
import time


def burn(secs):
    end = time.thread_time() + secs
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


def frozen(cg):
    with open(os.path.join(cg, "cgroup.events")) as f:
        return any(line.split() == ["frozen", "1"] for line in f)


def be_child(lock, cg, crit):
    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    os.sched_setaffinity(0, range(os.cpu_count()))
    while True:
        with lock:
            burn(crit)
        time.sleep(0.01)


def main():
    cg, lc_cpu, rounds, hog, crit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    ctx = mp.get_context("fork")
    lock = ctx.Lock()
    os.sched_setaffinity(0, {lc_cpu})
    child = ctx.Process(target=be_child, args=(lock, cg, crit), daemon=True)
    child.start()
    time.sleep(0.5)  # let the child take the lock
    try:
        for r in range(rounds):
            time.sleep(0.05)
            burn(hog)
            was_frozen = frozen(cg)
            t0 = time.monotonic()
            lock.acquire()
            wait = time.monotonic() - t0
            lock.release()
            print(json.dumps({"round": r, "wait_s": wait, "be_frozen_at_wait": was_frozen}), flush=True)
    finally:
        child.kill()
        child.join(10)


if __name__ == "__main__":
    sys.exit(main())
