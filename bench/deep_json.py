"""Reading a signed body nested deeper than Python's parser goes: the time of
``read_body`` at n and 2n bytes for the shapes that cost most, against the cut it
replaced (a regex that retried every quote of an unterminated string: quadratic).

    ./dev shell bench/deep_json.py [--repeats 3]

CPU time of this process, best of the repeats. Linear work doubles from n to 2n;
quadratic work quadruples.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

from _common import arguments, figures_comment, write_section

from delivery_pipeline.whatsapp.webhook_bodies import (
    CUT_MAX_BYTES,
    CUT_MAX_TOKENS,
    MAX_DEPTH,
    read_body,
)

# The cut before this one (for comparison only): one regex over the whole body.
_OLD_STRING_OR_BRACKET = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def old_cut(body: bytes, max_depth: int) -> bytes:
    out: list[bytes] = []
    depth = cut_at = kept_from = 0
    for match in _OLD_STRING_OR_BRACKET.finditer(body):
        first = match.group()[0]
        if first in b"[{":
            depth += 1
            if not cut_at and depth > max_depth:
                cut_at = depth
                out.append(body[kept_from : match.start()] + b"null")
        elif first in b"]}":
            if cut_at == depth:
                cut_at, kept_from = 0, match.end()
            depth -= 1
    if not cut_at:
        out.append(body[kept_from:])
    return b"".join(out)


def old_read(body: bytes) -> None:
    try:
        json.loads(body)
    except RecursionError:
        json.loads(old_cut(body, MAX_DEPTH))


def new_read(body: bytes) -> None:
    read_body(body)


def escaped_quotes(size: int) -> bytes:
    return b"[" * 2000 + b'"' + b'\\"' * ((size - 2001) // 2)


def deep_arrays(size: int) -> bytes:
    return b"[" * (size // 2) + b"]" * (size // 2)


def pairs(size: int) -> bytes:
    return b"[" * 2000 + b"[]" * ((size - 4000) // 2) + b"]" * 2000


SHAPES: dict[str, Callable[[int], bytes]] = {
    "deep, then one unterminated string of escaped quotes": escaped_quotes,
    "arrays nested all the way": deep_arrays,
    "deep, then bracket pairs": pairs,
}


def cpu_seconds(read: Callable[[bytes], None], body: bytes, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        try:
            read(body)
        except ValueError:
            pass  # refused or not JSON: what it cost is what counts
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = []
    worst_ratio = 0.0
    for name, make in SHAPES.items():
        for who, read, sizes in (
            ("before", old_read, (8 * 1024, 16 * 1024)),
            ("now", new_read, (CUT_MAX_BYTES // 2, CUT_MAX_BYTES)),
            ("now", new_read, (2 * 1024 * 1024, 4 * 1024 * 1024)),
        ):
            small, large = (cpu_seconds(read, make(n), args.repeats) for n in sizes)
            ratio = large / small if small > 0 else float("nan")
            if who == "now" and sizes[1] <= CUT_MAX_BYTES:  # refusals: sub-millisecond noise
                worst_ratio = max(worst_ratio, ratio)
            rows.append(
                f"| {name} | {who} | {sizes[0] // 1024:,} / {sizes[1] // 1024:,} KiB | "
                f"{small * 1000:.2f} / {large * 1000:.2f} | {ratio:.1f} |"
            )
            print(rows[-1], flush=True)
    body = (
        "`read_body` on bodies nested deeper than Python's parser goes (it raises "
        "RecursionError past ~1,000 levels, and the body is then cut at 48 levels): CPU ms "
        f"at n and 2n bytes, best of {args.repeats}. *Before*: the regex cut this replaced, "
        "which retried every quote of an unterminated string (measured at small sizes: it "
        f"takes minutes at 100 KiB). *Now*: one forward pass, cut only up to "
        f"{CUT_MAX_BYTES // 1024:,} KiB and {CUT_MAX_TOKENS:,} brackets and strings, refused "
        "beyond (the 2 / 4 MiB rows: the 4 MiB body limit). Linear work doubles from n to 2n, "
        "quadratic work quadruples.\n\n"
        "| body | cut | n / 2n | CPU ms at n / 2n | 2n ÷ n |\n|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\n"
        + figures_comment({"deep_json_worst_cut_ratio_now": round(worst_ratio, 2)})
    )
    write_section("deep_json", f"./dev shell bench/deep_json.py --repeats {args.repeats}", body)


if __name__ == "__main__":
    main()
