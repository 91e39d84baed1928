"""What the torch_*.py kernel scripts share: CPU time per call (the machine is shared, and wall
time counts other processes' turns), as the Google Benchmark binaries report it."""
import time


def time_call(fn, min_seconds=0.3):
    """Mean CPU seconds per call over >= min_seconds, after one warm-up call."""
    fn()
    calls, start = 0, time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return elapsed / calls
