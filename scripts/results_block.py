#!/usr/bin/env python3
"""Replaces a measurement script's block in a Markdown file with the text on standard input.

    results_block.py FILE NAME < text
    results_block.py --check FILE NAME

The block is every line between "<!-- NAME: begin -->" and "<!-- NAME: end -->" (the marker lines
stay). --check only says whether FILE has the block, so that a script can refuse before it
measures. The file is rewritten through a temporary file beside it and a rename, so a failure leaves
it as it was. The measurement scripts that write their tables into docs/results.md
(roofline_whole_step.sh, bench_vs_pytorch.sh and compare_kernel_sets.sh, with --results FILE) all
go through here. Exit 2 when FILE has no such block, naming the lines it needs.
"""
import os
import sys


def main() -> int:
    arguments = sys.argv[1:]
    check_only = arguments[:1] == ["--check"]
    if check_only:
        arguments = arguments[1:]
    if len(arguments) != 2:
        print("\n".join(__doc__.strip().split("\n")[2:4]), file=sys.stderr)
        return 2
    path, name = arguments
    begin, end = f"<!-- {name}: begin -->", f"<!-- {name}: end -->"
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as error:
        print(f"{name}: cannot read {path}: {error.strerror}", file=sys.stderr)
        return 2
    if begin not in lines or end not in lines:
        print(f"{name}: {path} has no block to write into: it needs the lines {begin} and {end}",
              file=sys.stderr)
        return 2
    first, last = lines.index(begin), lines.index(end)
    if last < first:
        print(f"{name}: in {path} the line {end} comes before {begin}", file=sys.stderr)
        return 2
    if check_only:
        return 0
    lines[first + 1:last] = sys.stdin.read().rstrip("\n").split("\n") + [""]
    temporary = f"{path}.{name}-tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            out.write("\n".join(lines))
        os.chmod(temporary, os.stat(path).st_mode & 0o7777)  # the file keeps its permissions
        os.replace(temporary, path)
    except OSError as error:
        if os.path.exists(temporary):
            os.remove(temporary)
        print(f"{name}: cannot write {path}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"{name}: wrote its tables into {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
