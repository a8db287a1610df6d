#!/usr/bin/env python3
"""Load on `lenet5 serve` over real sockets: slow connections, many clients, oversized bodies.

    scripts/serve_load.py URL [--pid PID] [--only slow|clients|bodies] [--quick]
                          [--slow 200] [--slow-seconds 20] [--requests 1000] [--clients 64]
                          [--body-mb 200]

URL is what `lenet5 serve` printed (http://127.0.0.1:PORT/); PID, the server's process, lets the
script read its memory (/proc/PID/status) and check that it is still alive at the end.

1. slow: holds --slow connections open, each from a loopback address of its own (127.0.0.2, ...,
   as that many clients would; a server counts connections per address), each sending the start
   of a request and then one header line every --slow-interval seconds, and opening again as soon
   as the server drops it. Meanwhile, for --slow-seconds (past the server's 5 s for a head, so
   that it drops them and they come back), a classify round trip from 127.0.0.1 every 50 ms, each
   on a new connection: their median and 90th percentile, and how many slow connections were open.
2. clients: --requests classify requests from --clients threads, each on a keep-alive connection
   of its own: requests per second, median, 90th percentile and slowest round trip.
3. bodies: a --body-mb MB body to /api/classify, chunked and then with a Content-Length, sent
   while the answer is awaited: its status, the seconds to it, and with --pid the server's RSS
   before, at its highest while the body was sent (sampled every 5 ms) and after.

Each classify request posts the page's own drawing (tests/data/page_drawing_7.png, as
scripts/serve_bench.py --page-drawing). Exits 1 when a check fails: a classify request not
answered 200, an oversized body not answered 413, the server's process gone. The figures are
printed, not judged: the targets are docs/reliability.md's. --quick is the short version
the test suite runs: 20 slow connections sending every 0.5 s for 2 s, 100 requests from 16
clients, 8 MB bodies.
Standard library only.
"""
import argparse
import http.client
import os
import select
import socket
import statistics
import sys
import threading
import time
import urllib.parse

PAGE_DRAWING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                            "page_drawing_7.png")
TIMEOUT_S = 30  # a round trip this slow is a failure, not a figure


def percentile(sorted_values, fraction):
    return sorted_values[min(len(sorted_values) - 1, int(fraction * len(sorted_values)))]


def summary(times_s):
    ms = sorted(t * 1000 for t in times_s)
    return (f"median {statistics.median(ms):.1f} ms, p90 {percentile(ms, 0.9):.1f} ms, "
            f"max {ms[-1]:.1f} ms")


def classify(host, port, drawing, connection=None):
    """One classify round trip: (seconds, status). On `connection` when given, else a new one."""
    own = connection is None
    if own:
        connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S,
                                                source_address=(local_address(host, 1), 0))
    start = time.perf_counter()
    try:
        connection.request("POST", "/api/classify", drawing, {"Content-Type": "image/png"})
        response = connection.getresponse()
        response.read()
        return time.perf_counter() - start, response.status
    finally:
        if own:
            connection.close()


def local_address(host, k):
    """The k-th loopback address (127.0.0.k) when the server is on loopback, else any."""
    return f"127.0.0.{k}" if host.startswith("127.") else ""


class SlowClients(threading.Thread):
    """n connections that each send a request's head one line every `interval` seconds."""

    def __init__(self, host, port, n, interval):
        super().__init__(daemon=True)
        self.host, self.port, self.n, self.interval = host, port, n, interval
        self.sockets = [None] * n
        self.opened = self.dropped = 0
        self.open_samples = []
        self.stopping = threading.Event()

    def open(self, i):
        try:
            s = socket.create_connection((self.host, self.port), timeout=5,
                                         source_address=(local_address(self.host, 2 + i), 0))
            s.sendall(b"POST /api/classify HTTP/1.1\r\nHost: slow\r\nContent-Type: image/png\r\n")
            self.sockets[i] = s
            self.opened += 1
        except OSError:
            self.sockets[i] = None

    def drop(self, i):
        self.sockets[i].close()
        self.sockets[i] = None
        self.dropped += 1

    def run(self):
        while not self.stopping.is_set():
            # A socket the server closed (or answered and closed) reads as ready.
            live = [s for s in self.sockets if s is not None]
            ready, _, _ = select.select(live, [], [], 0) if live else ([], [], [])
            for i, s in enumerate(self.sockets):
                if s is None:
                    continue
                try:
                    if s in ready:
                        s.recv(65536)
                        raise OSError("closed by the server")
                    s.send(b"X-Slow: 1\r\n")
                except OSError:
                    self.drop(i)
            for i in range(self.n):
                if self.sockets[i] is None:
                    self.open(i)
            self.open_samples.append(sum(s is not None for s in self.sockets))
            self.stopping.wait(self.interval)
        for s in self.sockets:
            if s is not None:
                s.close()


def slow_phase(args, host, port, drawing):
    slow = SlowClients(host, port, args.slow, args.slow_interval)
    slow.start()
    time.sleep(2 * args.slow_interval)  # every slow connection open and sending
    times, failures = [], 0
    end = time.perf_counter() + args.slow_seconds
    while time.perf_counter() < end:
        try:
            seconds, status = classify(host, port, drawing)
            times.append(seconds)
            failures += status != 200
        except OSError as e:
            failures += 1
            print(f"  classify failed: {e}")
        time.sleep(0.05)
    slow.stopping.set()
    slow.join()
    held = slow.open_samples[2:] or slow.open_samples
    print(f"slow: {args.slow} slow connections for {args.slow_seconds:g} s (open: "
          f"{min(held)}-{max(held)}, {statistics.mean(held):.0f} on average; {slow.dropped} "
          f"dropped by the server and opened again); "
          f"{len(times)} classify round trips, each on a new connection: "
          f"{summary(times) if times else 'none answered'}; {failures} failed")
    return failures == 0


def clients_phase(args, host, port, drawing):
    lock = threading.Lock()
    remaining = [args.requests]
    times, statuses, errors = [], {}, []

    def client():
        connection = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
        while True:
            with lock:
                if remaining[0] == 0:
                    break
                remaining[0] -= 1
            try:
                seconds, status = classify(host, port, drawing, connection)
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    errors.append(repr(e))
                connection.close()  # opened again by the next request
                continue
            with lock:
                times.append(seconds)
                statuses[status] = statuses.get(status, 0) + 1
        connection.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    print(f"clients: {args.requests} classify requests from {args.clients} clients in "
          f"{elapsed:.2f} s ({len(times) / elapsed:.0f}/s): statuses {statuses}, "
          f"{len(errors)} failed{' (' + errors[0] + ')' if errors else ''}; "
          f"{summary(times) if times else ''}")
    return statuses.get(200, 0) == args.requests


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise OSError(f"no VmRSS for process {pid}")


def send_big_body(host, port, size, chunked, pid):
    """Sends a `size`-byte body while reading the answer: (status, seconds, rss before/peak/after)."""
    s = socket.create_connection((host, port), timeout=TIMEOUT_S)
    framing = (b"Transfer-Encoding: chunked" if chunked else
               b"Content-Length: " + str(size).encode())
    piece = b"\0" * 65536
    done = threading.Event()
    peak = [rss_mb(pid) if pid else 0]

    def send():
        try:
            s.sendall(b"POST /api/classify HTTP/1.1\r\nHost: load\r\nContent-Type: image/png\r\n" +
                      framing + b"\r\n\r\n")
            for _ in range(size // len(piece)):
                if done.is_set():
                    return
                s.sendall(b"10000\r\n" + piece + b"\r\n" if chunked else piece)
            s.sendall(b"0\r\n\r\n" if chunked else b"")
        except OSError:
            pass  # the server closed the connection after its answer

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mb(pid))
            time.sleep(0.005)

    before = peak[0]
    threads = [threading.Thread(target=send)] + ([threading.Thread(target=sample)] if pid else [])
    start = time.perf_counter()
    for t in threads:
        t.start()
    answer = b""
    try:
        while b"\r\n" not in answer:
            data = s.recv(4096)
            if not data:
                break
            answer += data
    except OSError:
        pass
    seconds = time.perf_counter() - start
    time.sleep(0.2)  # the peak after the answer, while the server closes the connection
    done.set()
    for t in threads:
        t.join()
    s.close()
    status = int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1 ") else None
    return status, seconds, before, peak[0], rss_mb(pid) if pid else 0


def alive(pid):
    """Whether process `pid` runs (a process that ended but is not yet reaped is a zombie, 'Z')."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in f)
    except OSError:
        return False


def bodies_phase(args, host, port, pid):
    ok = True
    size = args.body_mb << 20
    for chunked in (True, False):
        status, seconds, before, peak, after = send_big_body(host, port, size, chunked, pid)
        memory = (f"; RSS {before:.1f} MB before, {peak:.1f} MB at most (+{peak - before:.1f}), "
                  f"{after:.1f} MB after" if pid else "")
        print(f"bodies: {args.body_mb} MB {'chunked' if chunked else 'with Content-Length'}: "
              f"HTTP {status} after {seconds:.3f} s{memory}")
        ok = ok and status == 413
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--pid", type=int, help="the server's process id")
    parser.add_argument("--only", choices=["slow", "clients", "bodies"])
    parser.add_argument("--quick", action="store_true", help="the short version (see above)")
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--slow-interval", type=float, default=1.0)
    parser.add_argument("--slow-seconds", type=float, default=20.0)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--body-mb", type=int, default=200)
    args = parser.parse_args()
    if args.quick:
        args.slow, args.slow_interval, args.slow_seconds = 20, 0.5, 2
        args.requests, args.clients, args.body_mb = 100, 16, 8
    address = urllib.parse.urlsplit(args.url)
    host, port = address.hostname, address.port
    with open(PAGE_DRAWING, "rb") as f:
        drawing = f.read()
    ok = True
    if args.only in (None, "slow"):
        ok = slow_phase(args, host, port, drawing) and ok
    if args.only in (None, "clients"):
        ok = clients_phase(args, host, port, drawing) and ok
    if args.only in (None, "bodies"):
        ok = bodies_phase(args, host, port, args.pid) and ok
    if args.pid and not alive(args.pid):
        print(f"the server's process {args.pid} is gone")
        ok = False
    try:
        seconds, status = classify(host, port, drawing)
        print(f"afterwards: classify answered {status} in {seconds * 1000:.1f} ms")
        ok = ok and status == 200
    except OSError as e:
        print(f"afterwards: the server does not answer: {e}")
        ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
