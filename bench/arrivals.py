"""Where a fleet's sends bunch up: on the wire, or in the sandbox's own clock.

A fleet of ``--sweeps`` sweep processes shares one number at ``--limit`` msg/s;
the sandbox counts each send at its stamp (the inbox's ``arrived``: taken as
the request's bytes are read, corrected by the kernel's coarse reading when
the read waited longer than 8 ms, sandbox/arrival.py), which on a busy
machine can still come a little after the request reached the sandbox's
socket. A capture process (a raw socket on the loopback interface, run as root)
takes the kernel's own timestamp of every request to the sandbox as it arrives,
the closest this machine has to what the platform's edge would see. Per send,
matched by its callback tag: the sandbox's lag behind the kernel. Per run: the
busiest sliding second counted on each clock, against the limit and against
the pace the fleet keeps (97 % of it). If the kernel's count stays at the
pace while the sandbox's exceeds it, the bunching is the sandbox's own.

    ./dev shell bench/arrivals.py [--docs 200] [--runs 3] [--sweeps 4] [--loads 0,2]
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SO_TIMESTAMPNS = 35
ETH_P_ALL = 0x0003
PACKET_HOST = 0
_REQUEST = re.compile(rb"^POST /v[\d.]+/(\d+)/messages ")
_TAG = re.compile(rb'"biz_opaque_callback_data":\s*"([^"]+)"')


def capture(port: int, out: Path) -> None:
    """Until SIGTERM: every request to ``port`` on loopback, as `kernel_ns number tag`."""
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.bind(("lo", 0))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.settimeout(0.2)
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    seen: list[str] = []
    out.with_suffix(".ready").touch()
    while not stopping:
        try:
            data, ancillary, _, address = sock.recvmsg(65536, 64)
        except TimeoutError:
            continue
        if address[2] != PACKET_HOST or len(data) < 54:
            continue
        ip = data[14:]
        if ip[0] >> 4 != 4 or ip[9] != socket.IPPROTO_TCP:
            continue
        tcp = ip[(ip[0] & 0x0F) * 4 :]
        if struct.unpack("!H", tcp[2:4])[0] != port:
            continue
        payload = tcp[(tcp[12] >> 4) * 4 :]
        request = _REQUEST.match(payload)
        if request is None:
            continue
        tag = _TAG.search(payload)
        stamp = next(
            (struct.unpack("qq", d[:16]) for lvl, typ, d in ancillary if typ == SO_TIMESTAMPNS),
            None,
        )
        if stamp is None or tag is None:
            continue
        ns = stamp[0] * 1_000_000_000 + stamp[1]
        seen.append(f"{ns} {request.group(1).decode()} {tag.group(1).decode()}")
    out.write_text("\n".join(seen) + "\n")


def busiest_second(times: list[float]) -> int:
    """The most sends in any sliding second."""
    times = sorted(times)
    return max((bisect.bisect_left(times, t + 1.0) - i for i, t in enumerate(times)), default=0)


def tightest_ms(times: list[float], count: int) -> float:
    """The shortest span holding ``count`` consecutive sends, in milliseconds."""
    times = sorted(times)
    spans = (b - a for a, b in zip(times, times[count - 1 :], strict=False))
    return 1000 * min(spans, default=float("inf"))


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))]


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--capture":
        capture(int(sys.argv[2]), Path(sys.argv[3]))
        return
    from _common import arguments, figures_comment, scratch_database, write_section

    from delivery_pipeline.testing.sandbox import start_sandbox

    parser = arguments(__doc__)
    parser.add_argument("--docs", type=int, default=200, help="nine-chunk plans per run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sweeps", type=int, default=4)
    parser.add_argument("--limit", type=int, default=80)
    parser.add_argument(
        "--loads", default="0,2", help="busy-loop processes beside the fleet, one set of runs each"
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("the capture needs root (a raw socket on the loopback interface)")
        return

    rows, fig = [], {"runs": []}
    with scratch_database() as url, start_sandbox() as sandbox:
        plan = [(load, run) for load in map(int, args.loads.split(",")) for run in range(args.runs)]
        for load, run in plan:
            row, figures = measured_run(url, sandbox, load, run, args)
            print(row, flush=True)
            fig["runs"].append(row)
            lag = f"{row['lag_p50_ms']:.2f} / {row['lag_p99_ms']:.2f} / {row['lag_max_ms']:.1f}"
            rows.append(
                f"| {load} | {run + 1} | {row['matched']}/{figures['received']} | {lag} | "
                f"{row['busiest_wire']} | {row['busiest_sandbox']} | "
                f"{row['tightest_wire_ms']:,.0f} | {row['tightest_sandbox_ms']:,.0f} | "
                f"{figures['throttled_130429']} | {100 * row['share']:.1f} % |"
            )
    write_section(
        "arrivals",
        f"./dev shell bench/arrivals.py --docs {args.docs} --runs {args.runs} "
        f"--sweeps {args.sweeps} --limit {args.limit} --loads {args.loads}",
        _section(args, rows) + figures_comment(fig),
    )


def measured_run(
    url: str, sandbox: Any, load: int, run: int, args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One fleet run (bench/fleet.py's) beside ``load`` busy loops, every request to the
    sandbox captured on the wire: the run's row and the fleet's own figures."""
    from fleet import fleet_run

    port = int(sandbox.url.rsplit(":", 1)[1])
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(load)]
    out = Path(f"/tmp/dp-arrivals-{os.getpid()}-{load}-{run}.txt")
    proc = subprocess.Popen([sys.executable, __file__, "--capture", str(port), str(out)])
    deadline = time.monotonic() + 10
    while not out.with_suffix(".ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        figures = fleet_run(
            url, sandbox, limit=args.limit, docs=args.docs, sweeps=args.sweeps, latency_ms=150.0
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        for hog in hogs:
            hog.kill()
            hog.wait()
    kernel = {}
    for line in out.read_text().split("\n"):
        if line:
            ns, _number, tag = line.split(" ")
            kernel.setdefault(tag, int(ns) / 1e9)
    out.unlink()
    out.with_suffix(".ready").unlink()
    stamped = {
        m["callback_data"]: dt.datetime.fromisoformat(m["arrived"]).timestamp()
        for messages in sandbox.inboxes().values()
        for m in messages
        if m.get("callback_data") and m.get("arrived")
    }
    both = sorted(set(kernel) & set(stamped))
    lags = [1000 * (stamped[t] - kernel[t]) for t in both]
    # The sandbox refuses a send that finds ``limit`` others in its second:
    # limit + 1 sends inside 1,000 ms; the pace spaces them 1,000 × limit /
    # (0.97 × limit) ms apart. The margin each clock kept, in one figure.
    row = {
        "load": load,
        "matched": len(both),
        "accepted": figures["received"],
        "throttled": figures["throttled_130429"],
        "lag_p50_ms": percentile(lags, 0.5),
        "lag_p99_ms": percentile(lags, 0.99),
        "lag_max_ms": max(lags),
        "busiest_wire": busiest_second([kernel[t] for t in both]),
        "busiest_sandbox": busiest_second([stamped[t] for t in both]),
        "tightest_wire_ms": tightest_ms([kernel[t] for t in both], args.limit + 1),
        "tightest_sandbox_ms": tightest_ms([stamped[t] for t in both], args.limit + 1),
        "share": figures["steady"] / args.limit,
    }
    return row, figures


def _section(args: argparse.Namespace, rows: list[str]) -> str:
    pace = args.limit * 0.97
    return (
        f"{args.sweeps} `sweep` processes and the webhook service share one {args.limit} "
        f"msg/s number (paced for {pace:.1f}), {args.docs} nine-chunk plans a run, 150 ms "
        "per send (bench/fleet.py's run). *On the wire*: the kernel's timestamp of each "
        "request arriving on loopback (a raw-socket capture in a process of its own); "
        "*in the sandbox*: its stamp, where it counts the limit (as the request's bytes are "
        "read, corrected by the kernel's 4 ms reading when the read waited longer than "
        "8 ms). Lag: sandbox "
        "stamp − kernel arrival, per send (matched by callback tag). Busiest second: the "
        "most sends in any sliding second on each clock. Tightest: the shortest span "
        f"of {args.limit + 1} consecutive sends on each clock (the sandbox refuses below "
        f"1,000 ms; the pace spaces them {1000 * args.limit / pace:,.0f} ms). *Load*: processes "
        "spinning on the 2 cores beside the fleet, as other work on a shared machine "
        "does.\n\n"
        "| load | run | matched | sandbox lag p50 / p99 / max ms | busiest second on the wire | "
        f"busiest second in the sandbox | tightest {args.limit + 1} on the wire, ms | "
        "… in the sandbox, ms | 130429 | steady share of the limit |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
    )


if __name__ == "__main__":
    main()
