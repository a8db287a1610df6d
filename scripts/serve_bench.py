#!/usr/bin/env python3
"""Round trips of `lenet5 serve`'s classify-with-activations on one keep-alive connection.

    scripts/serve_bench.py URL [--requests 1000] [--image tests/data/five_clean.png]

URL is what `lenet5 serve` printed (http://127.0.0.1:PORT/). Each request posts the image (as the
page posts its canvas, image/png) and reads the whole answer: the 28x28 and 32x32 inputs, the ten
probabilities and every layer's activations. Prints the median, 90th percentile and the mean in
milliseconds. Standard library only.
"""
import argparse
import http.client
import statistics
import time
import urllib.parse


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--image", default="tests/data/five_clean.png")
    args = parser.parse_args()
    address = urllib.parse.urlsplit(args.url)
    with open(args.image, "rb") as f:
        body = f.read()
    connection = http.client.HTTPConnection(address.hostname, address.port)
    headers = {"Content-Type": "image/png"}
    times, answer_bytes = [], 0
    for _ in range(args.requests + 10):  # the first ten warm up and are not counted
        start = time.perf_counter()
        connection.request("POST", "/api/classify", body, headers)
        response = connection.getresponse()
        answer = response.read()
        times.append(time.perf_counter() - start)
        if response.status != 200:
            raise SystemExit(f"HTTP {response.status}: {answer[:200]!r}")
        answer_bytes = len(answer)
    times = sorted(t * 1000 for t in times[10:])
    print(f"{args.requests} classify-with-activations round trips, {len(body)} B image, "
          f"{answer_bytes} B answer: median {statistics.median(times):.2f} ms, "
          f"p90 {times[int(0.9 * len(times))]:.2f} ms, mean {statistics.mean(times):.2f} ms")


if __name__ == "__main__":
    main()
