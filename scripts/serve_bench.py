#!/usr/bin/env python3
"""Round trips of `lenet5 serve`'s classify-with-activations on one keep-alive connection.

    scripts/serve_bench.py URL [--requests 1000] [--image F | --page-drawing]

URL is what `lenet5 serve` printed (http://127.0.0.1:PORT/). Each request posts the image (as the
page posts its canvas, image/png) and reads the whole answer: the 28x28 and 32x32 inputs, the ten
probabilities and every layer's activations. Prints the median, 90th percentile and the mean in
milliseconds. Standard library only.

--page-drawing posts what the page really sends: tests/data/page_drawing_7.png, a 7 drawn on the
page's 280x280 pad by the browser test (tests/browser/serve_page.mjs saves it as drawn-7.png), the
bytes of the pad's canvas.toBlob('image/png'): RGBA, black 18-pixel strokes on white.
"""
import argparse
import http.client
import statistics
import struct
import time
import urllib.parse


PAGE_DRAWING = "tests/data/page_drawing_7.png"


def png_size(data):
    """Width and height from a PNG's IHDR chunk (which follows the 8-byte signature)."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return "?", "?"
    return struct.unpack(">II", data[16:24])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--image", default="tests/data/five_clean.png")
    parser.add_argument("--page-drawing", action="store_true",
                        help=f"post {PAGE_DRAWING} instead of --image")
    args = parser.parse_args()
    address = urllib.parse.urlsplit(args.url)
    image = PAGE_DRAWING if args.page_drawing else args.image
    with open(image, "rb") as f:
        body = f.read()
    width, height = png_size(body)
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
    print(f"{args.requests} classify-with-activations round trips, {image} ({width}x{height}, "
          f"{len(body)} B), "
          f"{answer_bytes} B answer: median {statistics.median(times):.2f} ms, "
          f"p90 {times[int(0.9 * len(times))]:.2f} ms, mean {statistics.mean(times):.2f} ms")


if __name__ == "__main__":
    main()
