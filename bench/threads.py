"""What threads cost: run it in the sandbox and natively, side by side.

    airlock run bench/threads.py
    python3 bench/threads.py

Medians of 7 repetitions (after one untimed), each timed inside the
interpreter, so start-up is excluded.
"""
import queue
import statistics
import threading
import time


def median(f, reps=7):
    f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


STARTS = 50  # within the sandbox's default cap of 64 at once


def start_join():
    threads = [threading.Thread(target=lambda: None) for _ in range(STARTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


TRIPS = 5000


def round_trips():
    ping, pong = queue.SimpleQueue(), queue.SimpleQueue()

    def echo():
        for _ in range(TRIPS):
            pong.put(ping.get())

    t = threading.Thread(target=echo)
    t.start()
    for i in range(TRIPS):
        ping.put(i)
        pong.get()
    t.join()


def locked_increments():
    count = [0]
    lock = threading.Lock()

    def work():
        for _ in range(20000):
            with lock:
                count[0] += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count[0] == 80000


print(f"start and join a thread: {median(start_join) / STARTS * 1e3:.3f} ms")
print(f"a queue round trip between two threads: {median(round_trips) / TRIPS * 1e6:.1f} us")
print(f"4 threads x 20,000 increments under a Lock: {median(locked_increments) * 1e3:.1f} ms")
