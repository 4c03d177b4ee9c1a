"""Run every benchmark in sequence, then regenerate the summary table at the top
of docs/benchmarks.md (figure, target, measured, met?). Long on 2 cores: several
scripts (vs_procrastinate, fleet, arrivals, revisions, paced_tax) take ten
minutes or more each. Each script writes its own section; the summary reads
them back.

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
from collections.abc import Callable

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
    "deep_json": ["--repeats", "3"],
    "pause": ["--bad-seconds", "40", "--docs", "40"],
    "statements": ["--docs", "600"],
    # bench/several_numbers.py (a script named numbers.py would shadow the standard
    # library's numbers module for every import of it in its process)
    "several_numbers": ["--numbers", "1,2,4", "--docs-per-number", "100"],
    "claim_depth": ["--depths", "1000,10000,100000", "--claims", "10"],
    "group_commit": ["--docs", "1600", "--batches", "1,4,16,32"],
    "fillfactor": ["--docs", "1000", "--pairs", "6"],
    "startup": ["--against", "1c547dd", "--pairs", "12"],
    # The revision before writes below the limit waited for company.
    "revisions": ["--against", "0456648", "--pairs", "6"],
    "arrivals": ["--docs", "200", "--runs", "3", "--loads", "0,2"],
    "pacer_wait": ["--pairs", "4", "--slots", "800"],
    "paced_tax": ["--pairs", "3", "--docs", "1000"],
}


def _table_row(section: str | None, first_cell: str) -> list[str] | None:
    for line in (section or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    return None


def _num(text: str) -> float:
    return float(re.sub(r"[^0-9.\-]", "", text.split("(")[0]))


def at_most(limit: float) -> Callable[[float], bool]:
    return lambda v: v <= limit


def at_least(limit: float) -> Callable[[float], bool]:
    return lambda v: v >= limit


def summary_rows() -> list[tuple[str, str, str, bool | None]]:
    rows: list[tuple[str, str, str, bool | None]] = []

    def add(
        figure: str,
        target: str,
        value: float | None,
        fmt: str,
        met: Callable[[float], bool] | None = None,
        scale: float = 1.0,
    ) -> None:
        """One row; ``met`` judges the value (None: a figure to report, no target)."""
        if value is None:
            rows.append((figure, target, "not run", None))
            return
        shown = float(value) * scale
        rows.append((figure, target, fmt.format(shown), None if met is None else met(shown)))

    t = read_figures("throughput") or {}
    add(
        "throughput at 80 msg/s, 150 ms latency (steady, share of limit)",
        "≥ 95 %",
        t.get("share_80"),
        "{:.1f} %",
        at_least(95),
        scale=100,
    )
    add(
        "throttling errors at 80 msg/s (all runs)", "0", t.get("throttled_80"), "{:.0f}", at_most(0)
    )
    add(
        f"throughput with the limit at {t.get('fast_limit', 1000):,} msg/s (steady)",
        "report (as close as the machine allows)",
        t.get("rate_fast"),
        "{:.0f} msg/s",
    )
    add(
        "one nine-chunk plan at 150 ms latency, wall",
        "≤ 1.6 s",
        t.get("one_plan_s"),
        "{:.2f} s",
        at_most(1.6),
    )
    p = read_figures("pause") or {}
    for fleet, who in (("1_1", "the service and a sweep"), ("2_2", "two services, two sweeps")):
        add(
            f"a bad token for 40 s, {who}: sends refused fleet-wide",
            "≤ 10",
            p.get(f"refused_{fleet}"),
            "{:.0f}",
            at_most(10),
        )
        interval = p.get(f"interval_{fleet}")
        add(
            f"a bad token for 40 s, {who}: fix → everything delivered",
            f"≤ two probe intervals ({2 * float(interval):.0f} s)" if interval else "≤ 2 intervals",
            p.get(f"recovery_{fleet}"),
            "{:.1f} s",
            at_most(2 * float(interval)) if interval else None,
        )
    st = read_figures("statements") or {}
    for mode, label in (("unbound", "limit not binding"), ("paced", "paced at 80 msg/s")):
        figures = st.get(mode) or {}
        add(
            f"Postgres statements per message, 2-chunk plans, {label}",
            "report",
            figures.get("calls_per_message"),
            "{:.2f}",
            None,
        )
    claims = (read_figures("claim_depth") or {}).get("claims") or {}
    deepest = claims.get("100000") or {}
    add(
        "one claim of 32 with 100,000 documents due (median)",
        "report",
        deepest.get("median_ms"),
        "{:.1f} ms",
    )
    f = read_figures("fleet") or {}
    add(
        "fleet (4 sweeps + service) at an 80 msg/s number: throttling refusals (130429), all runs",
        "0",
        f.get("fleet_throttled_80"),
        "{:.0f}",
        at_most(0),
    )
    add(
        "fleet at an 80 msg/s number: aggregate steady rate, share of the limit, lowest run",
        "≥ 95 %",
        f.get("fleet_share_80"),
        "{:.1f} %",
        at_least(95),
        scale=100,
    )
    add(
        "fleet at a 1,000 msg/s number: aggregate steady rate",
        "report",
        f.get("fleet_rate_1000"),
        "{:.0f} msg/s",
    )
    add(
        "fleet at a 1,000 msg/s number: 130429",
        "0",
        f.get("fleet_throttled_1000"),
        "{:.0f}",
        at_most(0),
    )
    for k, rate in sorted((f.get("scale") or {}).items(), key=lambda kv: int(kv[0])):
        add(
            f"scale at a 1,000 msg/s number, {k} sweep process(es): aggregate",
            "≥ 400 msg/s with 4" if k == "4" else "report",
            rate,
            "{:.0f} msg/s",
            at_least(400) if k == "4" else None,
        )
    add(
        "pacer round trips per message (fleet, 1,000 msg/s)",
        "report",
        f.get("pacer_per_msg_1000"),
        "{:.2f}",
    )
    n = read_figures("numbers") or {}
    add(
        "several numbers (1, 2, 4 at 80 msg/s, per-number and shared senders): 130429, all runs",
        "0",
        n.get("numbers_throttled"),
        "{:.0f}",
        at_most(0),
    )
    add(
        "several numbers: duplicated + missing parts, all runs",
        "0",
        None if not n else int(n["numbers_duplicates"]) + int(n["numbers_missing"]),
        "{:.0f}",
        at_most(0),
    )
    add(
        "several numbers: lowest number's share of its limit, any run",
        "report",
        n.get("numbers_min_share"),
        "{:.0f} %",
        scale=100,
    )
    a = read_figures("arrivals") or {}
    arrival_runs = a.get("runs") or []
    add(
        "fleet at an 80 msg/s number, quiet and beside 2 busy loops: 130429, all runs",
        "0",
        sum(int(r["throttled"]) for r in arrival_runs) if arrival_runs else None,
        "{:.0f}",
        at_most(0),
    )
    add(
        "… its busiest sliding second on the wire (kernel timestamps), worst run",
        "< 80",
        max(int(r["busiest_wire"]) for r in arrival_runs) if arrival_runs else None,
        "{:.0f}",
        lambda v: v < 80,
    )
    tightest = [float(r["tightest_wire_ms"]) for r in arrival_runs if "tightest_wire_ms" in r]
    add(
        "… its shortest span of 81 consecutive sends on the wire, worst run",
        "> 1,000 ms",
        min(tightest) if tightest else None,
        "{:,.0f} ms",
        lambda v: v > 1000,
    )
    add(
        "… the sandbox's stamp behind the wire, p99, worst run",
        "report",
        max(float(r["lag_p99_ms"]) for r in arrival_runs) if arrival_runs else None,
        "{:.1f} ms",
    )
    add(
        "… the sandbox's stamp behind the wire, max, worst run",
        "report",
        max(float(r["lag_max_ms"]) for r in arrival_runs) if arrival_runs else None,
        "{:.1f} ms",
    )
    batched = read_figures("group_commit") or {}
    for batch in ("1", "32"):
        add(
            f"advance_delivery, backend CPU per document, {batch} a statement",
            "report",
            batched.get(f"{batch}_by_key"),
            "{:.3f} ms",
        )
    p = read_figures("vs_procrastinate") or {}
    # Issue 20 sets 0.5 on the two-chunk plans it measured; nine-chunk keeps 0.8.
    for chunks, most in ((2, 0.5), (9, 0.8)):
        add(
            f"CPU per message (sender + Postgres), ours / procrastinate, {chunks}-chunk plans",
            f"≤ {most}",
            p.get(f"cpu_ratio_{chunks}"),
            "{:.2f}",
            at_most(most),
        )
        add(
            f"… the same, procrastinate sending with our HTTP client, {chunks}-chunk plans",
            "report",
            p.get(f"cpu_ratio_same_client_{chunks}"),
            "{:.2f}",
        )
    ours_pg, theirs_pg = p.get("pg_ms_ours_2"), p.get("pg_ms_theirs_2")
    add(
        "Postgres CPU per message, ours / procrastinate, 2-chunk plans",
        "≤ 1",
        None if ours_pg is None or theirs_pg is None else float(ours_pg) / float(theirs_pg),
        "{:.2f}",
        at_most(1.0),
    )
    add(
        "CPU per message paced at 80 msg/s ÷ unbound, ours, 2-chunk plans",
        "≤ 1.1",
        p.get("paced_ratio_ours"),
        "{:.2f}",
        at_most(1.1),
    )
    add(
        "… the same for procrastinate (for comparison)",
        "—",
        p.get("paced_ratio_theirs"),
        "{:.2f}",
    )
    add(
        "… ours not paced, fewer in flight, at about the paced rate ÷ unbound",
        "report",
        p.get("same_rate_ratio_ours"),
        "{:.2f}",
    )
    for key, how in (
        ("wakes_ours_2", "unbound"),
        ("same_rate_wakes_ours", "not paced, at about the paced rate"),
        ("paced_wakes_ours", "paced"),
    ):
        add(
            f"… the sender's wake-ups per message (voluntary context switches), {how}",
            "report",
            p.get(key),
            "{:.2f}",
        )
    pw = read_figures("pacer_wait") or {}
    add(
        "the pacer's own CPU per slot (32 senders, 80 msg/s, no sends), with the timer slack",
        "report",
        pw.get("cpu_ms_shipped"),
        "{:.3f} ms",
    )
    add(
        "… the same waiting again for what a timer fired early by (before)",
        "report",
        pw.get("cpu_ms_no_slack"),
        "{:.3f} ms",
    )
    pt = read_figures("paced_tax") or {}
    tax = pt.get("ratios") or {}
    assert isinstance(tax, dict)
    for key, how in (
        ("paced (shipped)", "as shipped"),
        ("paced, merged wakes", "the waits merged into one wake a message (bench only)"),
        ("paced, warm (spin taken out)", "the sweep's core kept busy, spin taken out (bench only)"),
    ):
        add(
            f"paced ÷ unbound in bench/paced_tax.py, {how}",
            "report",
            tax.get(key),
            "{:.2f}",
        )
    for key in sorted(k for k in p if k.startswith("ratio_")):
        limit = int(key.split("_")[1])
        add(
            f"ours / procrastinate, msg/s at a {limit:,} msg/s limit",
            "≥ 1.2",
            p[key],
            "{:.2f}",
            at_least(1.2),
        )
    amb = p.get("ambiguous_ours")
    add(
        "duplicated chunks after SIGKILLs, ours, no status webhooks, grace 0 (policy resend)",
        "only chunks whose outcome was unknown at the kill"
        + (f" ({amb})" if amb is not None else ""),
        p.get("dup_ours"),
        "{:.0f}",
        None if amb is None else at_most(amb),
    )
    add(
        "duplicated chunks after SIGKILLs, ours, status webhooks → service",
        "0",
        p.get("dup_ours_webhooks"),
        "{:.0f}",
        at_most(0),
    )
    add(
        "duplicated chunks after SIGKILLs, procrastinate (for comparison)",
        "—",
        p.get("dup_theirs"),
        "{:.0f}",
    )
    missing = sum(int(p[k]) for k in p if k.startswith("missing_ours")) if p else None
    add("missing chunks after SIGKILLs, ours", "0", missing, "{:.0f}", at_most(0))
    g = read_figures("guard") or {}
    for key, figure, target, fmt, met in (
        (
            "guard_ms",
            "heartbeat guard, 1M delivered + 100k awaiting (median)",
            "≤ 0.2 ms",
            "{:.3f} ms",
            at_most(0.2),
        ),
        ("guard_ratio", "guard ratio to an empty table", "≤ 1.5", "{:.2f}", at_most(1.5)),
        (
            "guard_1k_ms",
            "guard, 1M delivered + 1,000 awaiting (a guard joining people per row: ~2 ms)",
            "≤ 0.2 ms",
            "{:.3f} ms",
            at_most(0.2),
        ),
        (
            "guard_reviewing_ratio",
            "guard, also 100k awaiting review, ratio to an empty table",
            "≤ 1.5",
            "{:.2f}",
            at_most(1.5),
        ),
        (
            "guard_quiet_ratio",
            "guard, also 100k held for quiet hours, ratio to an empty table",
            "≤ 1.5",
            "{:.2f}",
            at_most(1.5),
        ),
    ):
        add(figure, target, g.get(key), fmt, met)
    m = read_figures("memory") or {}
    rss = m.get("rss_large_mib")
    add(
        "peak RSS of a sweep over 10k documents",
        "≤ 150 MB",
        rss,
        "{:.0f} MiB",
        at_most(150 / 1.048576),  # the target is in MB, the figure in MiB
    )
    add("peak RSS 10k / 1k", "≤ 1.2", m.get("rss_ratio"), "{:.2f}", at_most(1.2))

    def cell(section: str, first_cell: str, index: int) -> float | None:
        row = _table_row(read_section(section), first_cell)
        return _num(row[index]) if row else None

    add(
        "reaction latency p50",
        "≤ 150 ms",
        cell("reaction_latency", "200", 2),
        "{:.0f} ms",
        at_most(150),
    )
    add(
        "reaction latency p99",
        "≤ 500 ms",
        cell("reaction_latency", "200", 4),
        "{:.0f} ms",
        at_most(500),
    )
    add(
        "status webhook ingest, one update per POST",
        "≥ 1,000 updates/s",
        cell("status_ingest", "1", 3),
        "{:,.0f}/s",
        at_least(1000),
    )
    add(
        "status webhook ack p99",
        "≤ 250 ms",
        cell("status_ingest", "1", 5),
        "{:.1f} ms",
        at_most(250),
    )
    add(
        "ready in the database → first chunk, no poke, p50",
        "≤ 200 ms",
        cell("ready_latency", "200", 2),
        "{:.0f} ms",
        at_most(200),
    )
    add(
        "ready in the database → first chunk, no poke, p99",
        "≤ 1 s",
        cell("ready_latency", "200", 4),
        "{:.0f} ms",
        at_most(1000),
    )
    rec = read_figures("record_latency") or {}
    for path, how in (("push", "the service pushes it"), ("sensor", "the sensor alone")):
        add(
            f"delivery by the service → its event on delivered_documents, max ({how})",
            "≤ 5 s",
            rec.get(f"{path}_max_s"),
            "{:.2f} s",
            at_most(5.0),
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
