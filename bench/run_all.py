"""Run every benchmark in sequence, then regenerate the summary table at the top
of docs/benchmarks.md (figure, target, measured, met?). About 12-15 minutes on
2 cores. Each script writes its own section; the summary reads them back.

    ./dev shell bench/run_all.py [--skip vs_procrastinate,guard] [--summary-only]

With BENCH_DATABASE_URL (an admin URL) every script uses that server, else each
starts an embedded Postgres. vs_procrastinate needs
``./dev shell -m pip install procrastinate`` (it says so and is skipped otherwise).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

from _common import BENCHMARKS_MD, REPO, read_figures, read_section, write_section

# name → arguments; the order is the order they run in.
BENCHMARKS: dict[str, list[str]] = {
    "reaction_latency": ["--replies", "200", "--spacing-ms", "100"],
    "ready_latency": ["--documents", "200", "--spacing-ms", "50"],
    "status_ingest": ["--updates", "3000", "--connections", "8"],
    "guard": ["--iterations", "2000"],
    "memory": ["--small", "1000", "--large", "10000", "--repeats", "2"],
    "throughput": ["--docs", "500", "--repeats", "2"],
    "fleet": ["--docs", "200", "--fast-docs", "500", "--scale-docs", "500"],
    "vs_procrastinate": ["--docs", "500", "--docs-two", "1000", "--repeats", "2"],
    "record_latency": ["--replies", "30", "--modes", "push,sensor"],
}


def _table_row(section: str | None, first_cell: str) -> list[str] | None:
    for line in (section or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    return None


def _num(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text.split("(")[0]))


def summary_rows() -> list[tuple[str, str, str, bool | None]]:
    rows: list[tuple[str, str, str, bool | None]] = []

    def add(figure: str, target: str, value: float | None, fmt: str, ok: bool | None) -> None:
        rows.append(
            (
                figure,
                target,
                "not run" if value is None else fmt.format(value),
                None if value is None else ok,
            )
        )

    t = read_figures("throughput") or {}
    v = t.get("share_80")
    add(
        "throughput at 80 msg/s, 150 ms latency (steady, share of limit)",
        "≥ 95 %",
        None if v is None else 100 * float(v),
        "{:.1f} %",
        v is not None and float(v) >= 0.95,
    )
    v = t.get("throttled_80")
    add("throttling errors at 80 msg/s (all runs)", "0", v, "{:.0f}", v == 0)
    v = t.get("rate_fast")
    add(
        f"throughput with the limit at {t.get('fast_limit', 1000):,} msg/s (steady)",
        "report (as close as the machine allows)",
        v,
        "{:.0f} msg/s",
        None,
    )
    v = t.get("one_plan_s")
    add(
        "one nine-chunk plan at 150 ms latency, wall",
        "≤ 1.6 s",
        v,
        "{:.2f} s",
        v is not None and float(v) <= 1.6,
    )
    f = read_figures("fleet") or {}
    v = f.get("fleet_throttled_80")
    add(
        "fleet (4 sweeps + service) at an 80 msg/s number: throttling refusals (130429)",
        "0",
        v,
        "{:.0f}",
        v == 0,
    )
    v = f.get("fleet_share_80")
    add(
        "fleet at an 80 msg/s number: aggregate steady rate, share of the limit",
        "≥ 95 %",
        None if v is None else 100 * float(v),
        "{:.1f} %",
        v is not None and float(v) >= 0.95,
    )
    v = f.get("fleet_rate_1000")
    add("fleet at a 1,000 msg/s number: aggregate steady rate", "report", v, "{:.0f} msg/s", None)
    v = f.get("fleet_throttled_1000")
    add("fleet at a 1,000 msg/s number: 130429", "0", v, "{:.0f}", v == 0)
    for k, rate in sorted((f.get("scale") or {}).items(), key=lambda kv: int(kv[0])):
        add(
            f"scale at a 1,000 msg/s number, {k} sweep process(es): aggregate",
            "≥ 400 msg/s with 4" if k == "4" else "report",
            rate,
            "{:.0f} msg/s",
            float(rate) >= 400 if k == "4" else None,
        )
    v = f.get("pacer_per_msg_1000")
    add("pacer round trips per message (fleet, 1,000 msg/s)", "report", v, "{:.2f}", None)
    p = read_figures("vs_procrastinate") or {}
    for chunks in (2, 9):
        v = p.get(f"cpu_ratio_{chunks}")
        add(
            f"CPU per message (sender + Postgres), ours / procrastinate, {chunks}-chunk plans",
            "≤ 0.8",
            v,
            "{:.2f}",
            v is not None and float(v) <= 0.8,
        )
        v = p.get(f"cpu_ratio_same_client_{chunks}")
        add(
            f"… the same, procrastinate sending with our HTTP client, {chunks}-chunk plans",
            "report",
            v,
            "{:.2f}",
            None,
        )
    for key in sorted(k for k in p if k.startswith("ratio_")):
        limit = int(key.split("_")[1])
        add(
            f"ours / procrastinate, msg/s at a {limit:,} msg/s limit",
            "≥ 1.2",
            p[key],
            "{:.2f}",
            float(p[key]) >= 1.2,
        )
    v = p.get("dup_ours")
    amb = p.get("ambiguous_ours")
    add(
        "duplicated chunks after SIGKILLs, ours, no status webhooks, grace 0 (policy resend)",
        "only chunks whose outcome was unknown at the kill"
        + (f" ({amb})" if amb is not None else ""),
        v,
        "{:.0f}",
        None if amb is None else int(v) <= int(amb),
    )
    v = p.get("dup_ours_webhooks")
    add(
        "duplicated chunks after SIGKILLs, ours, status webhooks → service",
        "0",
        v,
        "{:.0f}",
        v == 0,
    )
    v = p.get("dup_theirs")
    add("duplicated chunks after SIGKILLs, procrastinate (for comparison)", "—", v, "{:.0f}", None)
    v = sum(int(p.get(k, 0)) for k in p if k.startswith("missing_ours")) if p else None
    add("missing chunks after SIGKILLs, ours", "0", v, "{:.0f}", v == 0)
    g = read_figures("guard") or {}
    v = g.get("guard_ms")
    add(
        "heartbeat guard, 1M delivered + 100k awaiting (median)",
        "≤ 0.2 ms",
        v,
        "{:.3f} ms",
        v is not None and float(v) <= 0.2,
    )
    v = g.get("guard_ratio")
    add("guard ratio to an empty table", "≤ 1.5", v, "{:.2f}", v is not None and float(v) <= 1.5)
    v = g.get("guard_1k_ms")
    add(
        "guard, 1M delivered + 1,000 awaiting (a guard joining people per row: ~2 ms)",
        "≤ 0.2 ms",
        v,
        "{:.3f} ms",
        v is not None and float(v) <= 0.2,
    )
    v = g.get("guard_reviewing_ratio")
    add(
        "guard, also 100k awaiting review, ratio to an empty table",
        "≤ 1.5",
        v,
        "{:.2f}",
        v is not None and float(v) <= 1.5,
    )
    v = g.get("guard_quiet_ratio")
    add(
        "guard, also 100k held for quiet hours, ratio to an empty table",
        "≤ 1.5",
        v,
        "{:.2f}",
        v is not None and float(v) <= 1.5,
    )
    m = read_figures("memory") or {}
    v = m.get("rss_large_mib")
    add(
        "peak RSS of a sweep over 10k documents",
        "≤ 150 MB",
        v,
        "{:.0f} MiB",
        v is not None and float(v) * 1.048576 <= 150,
    )
    v = m.get("rss_ratio")
    add("peak RSS 10k / 1k", "≤ 1.2", v, "{:.2f}", v is not None and float(v) <= 1.2)
    r = _table_row(read_section("reaction_latency"), "200") or None
    for label, idx, target, limit in (
        ("reaction latency p50", 2, "≤ 150 ms", 150),
        ("reaction latency p99", 4, "≤ 500 ms", 500),
    ):
        v = _num(r[idx]) if r else None
        add(label, target, v, "{:.0f} ms", v is not None and v <= limit)
    s = _table_row(read_section("status_ingest"), "1")
    v = _num(s[3]) if s else None
    add(
        "status webhook ingest, one update per POST",
        "≥ 1,000 updates/s",
        v,
        "{:,.0f}/s",
        v is not None and v >= 1000,
    )
    v = _num(s[5]) if s else None
    add("status webhook ack p99", "≤ 250 ms", v, "{:.1f} ms", v is not None and v <= 250)
    r = _table_row(read_section("ready_latency"), "200")
    p50 = _num(r[2]) if r else None
    add(
        "ready in the database → first chunk, no poke, p50",
        "≤ 200 ms",
        p50,
        "{:.0f} ms",
        p50 is not None and p50 <= 200,
    )
    p99 = _num(r[4]) if r else None
    add(
        "ready in the database → first chunk, no poke, p99",
        "≤ 1 s",
        p99,
        "{:.0f} ms",
        p99 is not None and p99 <= 1000,
    )
    rec = read_figures("record_latency") or {}
    for path, how in (("push", "the service pushes it"), ("sensor", "the sensor alone")):
        v = rec.get(f"{path}_max_s")
        add(
            f"delivery by the service → its event on delivered_documents, max ({how})",
            "≤ 5 s",
            v,
            "{:.2f} s",
            v is not None and float(v) <= 5.0,
        )
    return rows


def write_summary(command: str) -> None:
    rows = summary_rows()
    mark = {True: "yes", False: "**no**", None: "—"}
    body = (
        "Every figure below comes from the section of the same benchmark further down, which "
        "has the exact command. Measured on a shared 2-core machine: compare ratios within one "
        "run rather than absolute numbers across machines. Every script runs on "
        "`BENCH_DATABASE_URL` (an admin URL, e.g. `postgresql://postgres@127.0.0.1:5432/postgres`) "
        "when set, else on an embedded Postgres it starts itself.\n\n"
        "| figure | target | measured | met? |\n|---|---|---|---|\n"
        + "\n".join(f"| {f} | {t} | {m} | {mark[ok]} |" for f, t, m, ok in rows)
    )
    write_section("summary", command, body)
    # The summary belongs at the top, under the title.
    text = BENCHMARKS_MD.read_text()
    block = re.search(r"<!-- bench:summary -->.*?<!-- /bench:summary -->\n?", text, re.DOTALL)
    first = text.find("<!-- bench:")
    if block and first != block.start():
        text = text[: block.start()] + text[block.end() :]
        first = text.find("<!-- bench:")
        first = len(text) if first < 0 else first
        text = text[:first] + block.group(0).rstrip("\n") + "\n\n" + text[first:]
        BENCHMARKS_MD.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip", default="", help="comma-separated benchmark names to skip")
    parser.add_argument(
        "--summary-only",
        action="store_true",
        help="only regenerate the summary from the sections already written",
    )
    args = parser.parse_args()
    skip = {s for s in args.skip.split(",") if s}
    failed = []
    if not args.summary_only:
        for name, extra in BENCHMARKS.items():
            if name in skip:
                continue
            print(f"── {name} {' '.join(extra)}", flush=True)
            started = time.monotonic()
            status = subprocess.call(
                [sys.executable, str(REPO / "bench" / f"{name}.py"), *extra], cwd=REPO
            )
            print(f"── {name}: exit {status} in {time.monotonic() - started:.0f} s", flush=True)
            if status != 0:
                failed.append(name)
    write_summary(
        "./dev shell bench/run_all.py"
        + (" --summary-only" if args.summary_only else "")
        + (f" --skip {args.skip}" if args.skip else "")
    )
    print(read_section("summary"))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
