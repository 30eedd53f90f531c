"""A periodic CPU demand, for the Akita tests: a VM that wants BURN_MS of CPU
every PERIOD_MS.

  duty.py PERIOD_MS BURN_MS

At each period boundary (multiples of PERIOD_MS on the monotonic clock) it
wakes and burns BURN_MS of its own CPU time (time.thread_time, so time it
waits for a CPU does not count), then sleeps to the next boundary. A period
it could not finish in is not made up: demand stays BURN_MS / PERIOD_MS."""

import sys
import time


def main():
    period = float(sys.argv[1]) / 1e3
    burn = float(sys.argv[2]) / 1e3
    x = 0
    while True:
        now = time.monotonic()
        time.sleep(period - now % period)
        end = time.thread_time() + burn
        while time.thread_time() < end:
            x += 1
        # a period overrun by waiting skips to the next boundary


if __name__ == "__main__":
    main()
