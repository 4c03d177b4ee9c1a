"""Run every benchmark in sequence, then regenerate the summary table at the top
of docs/benchmarks.md (figure, target, measured, met?). Long on 2 cores: several
scripts (vs_procrastinate, fleet, arrivals) take ten minutes or more each. Each
script writes its own section; the summary reads them back, one small function
per benchmark (``PARTS``).

    ./dev shell bench/run_all.py [--skip vs_procrastinate,guard] [--summary-only]

With BENCH_DATABASE_URL (an admin URL) every script uses that server, else each
starts an embedded Postgres. vs_procrastinate needs
``./dev shell -m pip install procrastinate`` (it says so and is skipped otherwise).
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from _common import BENCHMARKS_MD, REPO, arguments, read_figures, read_section, write_section

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
    "startup": ["--against", "1c547dd", "--pairs", "12"],
    "arrivals": ["--docs", "200", "--runs", "3", "--loads", "0,2"],
    "render": ["--renders", "60", "--uploads", "60"],
    "api": ["--handovers", "1500", "--connections", "8", "--events", "3000"],
    "metrics_scrape": ["--iterations", "50"],
    "files": ["--repeats", "5", "--docs", "600", "--concurrency", "64", "--latency-ms", "150"],
}


Row = tuple[str, str, str, bool | None]


@dataclass
class Summary:
    """The summary table's rows, each read from a benchmark's own section."""

    rows: list[Row] = field(default_factory=list)

    def add(
        self,
        figure: str,
        target: str,
        value: float | None,
        fmt: str,
        met: Callable[[float], bool] | None = None,
        scale: float = 1.0,
    ) -> None:
        """One row; ``met`` judges the value (None: a figure to report, no target)."""
        if value is None:
            self.rows.append((figure, target, "not run", None))
            return
        shown = float(value) * scale
        self.rows.append((figure, target, fmt.format(shown), None if met is None else met(shown)))

    def none(self, figure: str, value: float | None) -> None:
        """A count whose target is zero (refusals, duplicates, parts missing)."""
        self.add(figure, "0", value, "{:.0f}", at_most(0))

    def report(self, figure: str, value: float | None, fmt: str, scale: float = 1.0) -> None:
        """A figure reported with no target."""
        self.add(figure, "report", value, fmt, scale=scale)

    def beside(self, figure: str, value: float | None, fmt: str) -> None:
        """A figure shown for comparison only (another system's, say)."""
        self.add(figure, "—", value, fmt)

    def share(self, figure: str, value: float | None) -> None:
        """A rate as a share of the number's limit (a fraction), at least 95 %."""
        self.add(figure, "≥ 95 %", value, "{:.1f} %", at_least(95), scale=100)


def at_most(limit: float) -> Callable[[float], bool]:
    return lambda v: v <= limit


def at_least(limit: float) -> Callable[[float], bool]:
    return lambda v: v >= limit


def figures(name: str) -> dict[str, Any]:
    """The figures a benchmark left in its section ({}: not run)."""
    return read_figures(name) or {}


def cell(section: str, first_cell: str, index: int) -> float | None:
    """A number from the row of ``section``'s table that starts with ``first_cell``."""
    for line in (read_section(section) or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return float(re.sub(r"[^0-9.\-]", "", cells[index].split("(")[0]))
    return None


def throughput(s: Summary) -> None:
    t = figures("throughput")
    s.share("throughput at 80 msg/s, 150 ms latency (steady, share of limit)", t.get("share_80"))
    s.none("throttling errors at 80 msg/s (all runs)", t.get("throttled_80"))
    s.add(
        f"throughput with the limit at {t.get('fast_limit', 1000):,} msg/s (steady)",
        "report (as close as the machine allows)",
        t.get("rate_fast"),
        "{:.0f} msg/s",
    )
    s.add(
        "one nine-chunk plan at 150 ms latency, wall",
        "≤ 1.6 s",
        t.get("one_plan_s"),
        "{:.2f} s",
        at_most(1.6),
    )


def pause(s: Summary) -> None:
    p = figures("pause")
    for fleet, who in (("1_1", "the service and a sweep"), ("2_2", "two services, two sweeps")):
        s.add(
            f"a bad token for 40 s, {who}: sends refused fleet-wide",
            "≤ 10",
            p.get(f"refused_{fleet}"),
            "{:.0f}",
            at_most(10),
        )
        interval = p.get(f"interval_{fleet}")
        s.add(
            f"a bad token for 40 s, {who}: fix → everything delivered",
            f"≤ two probe intervals ({2 * float(interval):.0f} s)" if interval else "≤ 2 intervals",
            p.get(f"recovery_{fleet}"),
            "{:.1f} s",
            at_most(2 * float(interval)) if interval else None,
        )


def statements(s: Summary) -> None:
    st = figures("statements")
    for mode, label in (("unbound", "limit not binding"), ("paced", "paced at 80 msg/s")):
        s.report(
            f"Postgres statements per message, 2-chunk plans, {label}",
            (st.get(mode) or {}).get("calls_per_message"),
            "{:.2f}",
        )


def claim_depth(s: Summary) -> None:
    deepest = (figures("claim_depth").get("claims") or {}).get("100000") or {}
    s.report(
        "one claim of 32 with 100,000 documents due (median)", deepest.get("median_ms"), "{:.1f} ms"
    )


def fleet(s: Summary) -> None:
    f = figures("fleet")
    s.none(
        "fleet (4 sweeps + service) at an 80 msg/s number: throttling refusals (130429), all runs",
        f.get("fleet_throttled_80"),
    )
    s.share(
        "fleet at an 80 msg/s number: aggregate steady rate, share of the limit, lowest run",
        f.get("fleet_share_80"),
    )
    s.report(
        "fleet at a 1,000 msg/s number: aggregate steady rate",
        f.get("fleet_rate_1000"),
        "{:.0f} msg/s",
    )
    s.none("fleet at a 1,000 msg/s number: 130429", f.get("fleet_throttled_1000"))
    for k, rate in sorted((f.get("scale") or {}).items(), key=lambda kv: int(kv[0])):
        s.add(
            f"scale at a 1,000 msg/s number, {k} sweep process(es): aggregate",
            "≥ 400 msg/s with 4" if k == "4" else "report",
            rate,
            "{:.0f} msg/s",
            at_least(400) if k == "4" else None,
        )
    s.report(
        "pacer round trips per message (fleet, 1,000 msg/s)", f.get("pacer_per_msg_1000"), "{:.2f}"
    )


def several_numbers(s: Summary) -> None:
    n = figures("numbers")
    s.none(
        "several numbers (1, 2, 4 at 80 msg/s, per-number and shared senders): 130429, all runs",
        n.get("numbers_throttled"),
    )
    s.none(
        "several numbers: duplicated + missing parts, all runs",
        None if not n else int(n["numbers_duplicates"]) + int(n["numbers_missing"]),
    )
    s.report(
        "several numbers: lowest number's share of its limit, any run",
        n.get("numbers_min_share"),
        "{:.0f} %",
        scale=100,
    )


def arrivals(s: Summary) -> None:
    runs = figures("arrivals").get("runs") or []

    def worst(key: str, pick: Callable[..., float] = max) -> float | None:
        values = [float(r[key]) for r in runs if key in r]
        return pick(values) if values else None

    s.none(
        "fleet at an 80 msg/s number, quiet and beside 2 busy loops: 130429, all runs",
        sum(int(r["throttled"]) for r in runs) if runs else None,
    )
    s.add(
        "… its busiest sliding second on the wire (kernel timestamps), worst run",
        "< 80",
        worst("busiest_wire"),
        "{:.0f}",
        lambda v: v < 80,
    )
    s.add(
        "… its shortest span of 81 consecutive sends on the wire, worst run",
        "> 1,000 ms",
        worst("tightest_wire_ms", min),
        "{:,.0f} ms",
        lambda v: v > 1000,
    )
    for key, which in (("lag_p99_ms", "p99"), ("lag_max_ms", "max")):
        s.report(
            f"… the sandbox's stamp behind the wire, {which}, worst run", worst(key), "{:.1f} ms"
        )


def procrastinate_cpu(s: Summary) -> None:
    p = figures("vs_procrastinate")
    # Issue 20 sets 0.5 on the two-chunk plans it measured; nine-chunk keeps 0.8.
    for chunks, most in ((2, 0.5), (9, 0.8)):
        s.add(
            f"CPU per message (sender + Postgres), ours / procrastinate, {chunks}-chunk plans",
            f"≤ {most}",
            p.get(f"cpu_ratio_{chunks}"),
            "{:.2f}",
            at_most(most),
        )
        s.report(
            f"… the same, procrastinate sending with our HTTP client, {chunks}-chunk plans",
            p.get(f"cpu_ratio_same_client_{chunks}"),
            "{:.2f}",
        )
    ours_pg, theirs_pg = p.get("pg_ms_ours_2"), p.get("pg_ms_theirs_2")
    s.add(
        "Postgres CPU per message, ours / procrastinate, 2-chunk plans",
        "≤ 1",
        None if ours_pg is None or theirs_pg is None else float(ours_pg) / float(theirs_pg),
        "{:.2f}",
        at_most(1.0),
    )


def procrastinate_paced(s: Summary) -> None:
    p = figures("vs_procrastinate")
    s.add(
        "CPU per message paced at 80 msg/s ÷ unbound, ours, 2-chunk plans",
        "≤ 1.1",
        p.get("paced_ratio_ours"),
        "{:.2f}",
        at_most(1.1),
    )
    s.beside("… the same for procrastinate (for comparison)", p.get("paced_ratio_theirs"), "{:.2f}")
    s.report(
        "… ours not paced, fewer in flight, at about the paced rate ÷ unbound",
        p.get("same_rate_ratio_ours"),
        "{:.2f}",
    )
    for key, how in (
        ("wakes_ours_2", "unbound"),
        ("same_rate_wakes_ours", "not paced, at about the paced rate"),
        ("paced_wakes_ours", "paced"),
    ):
        s.report(
            f"… the sender's wake-ups per message (voluntary context switches), {how}",
            p.get(key),
            "{:.2f}",
        )


def procrastinate_rate_and_crashes(s: Summary) -> None:
    p = figures("vs_procrastinate")
    for key in sorted(k for k in p if k.startswith("ratio_")):
        limit = int(key.split("_")[1])
        s.add(
            f"ours / procrastinate, msg/s at a {limit:,} msg/s limit",
            "≥ 1.2",
            p[key],
            "{:.2f}",
            at_least(1.2),
        )
    amb = p.get("ambiguous_ours")
    s.add(
        "duplicated chunks after SIGKILLs, ours, no status webhooks, grace 0 (policy resend)",
        "only chunks whose outcome was unknown at the kill"
        + (f" ({amb})" if amb is not None else ""),
        p.get("dup_ours"),
        "{:.0f}",
        None if amb is None else at_most(amb),
    )
    s.none(
        "duplicated chunks after SIGKILLs, ours, status webhooks → service",
        p.get("dup_ours_webhooks"),
    )
    s.beside(
        "duplicated chunks after SIGKILLs, procrastinate (for comparison)",
        p.get("dup_theirs"),
        "{:.0f}",
    )
    missing = sum(int(p[k]) for k in p if k.startswith("missing_ours")) if p else None
    s.none("missing chunks after SIGKILLs, ours", missing)


def guard(s: Summary) -> None:
    g = figures("guard")
    fast, ratio = at_most(0.2), at_most(1.5)
    s.add(
        "heartbeat guard, 1M delivered + 100k awaiting (median)",
        "≤ 0.2 ms",
        g.get("guard_ms"),
        "{:.3f} ms",
        fast,
    )
    s.add("guard ratio to an empty table", "≤ 1.5", g.get("guard_ratio"), "{:.2f}", ratio)
    s.add(
        "guard, 1M delivered + 1,000 awaiting (a guard joining people per row: ~2 ms)",
        "≤ 0.2 ms",
        g.get("guard_1k_ms"),
        "{:.3f} ms",
        fast,
    )
    for key, also in (
        ("guard_reviewing_ratio", "100k awaiting review"),
        ("guard_quiet_ratio", "100k held for quiet hours"),
    ):
        s.add(f"guard, also {also}, ratio to an empty table", "≤ 1.5", g.get(key), "{:.2f}", ratio)


def memory(s: Summary) -> None:
    m = figures("memory")
    s.add(
        "peak RSS of a sweep over 10k documents",
        "≤ 150 MB",
        m.get("rss_large_mib"),
        "{:.0f} MiB",
        at_most(150 / 1.048576),  # the target is in MB, the figure in MiB
    )
    s.add("peak RSS 10k / 1k", "≤ 1.2", m.get("rss_ratio"), "{:.2f}", at_most(1.2))


def files(s: Summary) -> None:
    """A document as one file: its share of the paced limit and its billed messages."""
    f = figures("files")
    s.share("documents as files paced at 80 msg/s, share of the limit", f.get("share_80"))
    s.add(
        "billed messages for a nine-part plan: as a file / as text",
        "1 / 9",
        None if not f else f["billed_file"] / f["billed_text"],
        "{:.2f}",
        at_most(1 / 9 + 1e-9),
    )


def latencies(s: Summary) -> None:
    """The reaction, ingest and ready latencies, read from their tables' rows."""
    reaction = ("reaction_latency", "200")
    ingest = ("status_ingest", "1")
    ready = ("ready_latency", "200")
    for figure, target, (section, row), column, fmt, met in (
        ("reaction latency p50", "≤ 150 ms", reaction, 2, "{:.0f} ms", at_most(150)),
        ("reaction latency p99", "≤ 500 ms", reaction, 4, "{:.0f} ms", at_most(500)),
        (
            "status webhook ingest, one update per POST",
            "≥ 1,000 updates/s",
            ingest,
            3,
            "{:,.0f}/s",
            at_least(1000),
        ),
        ("status webhook ack p99", "≤ 250 ms", ingest, 5, "{:.1f} ms", at_most(250)),
        (
            "ready in the database → first chunk, no poke, p50",
            "≤ 200 ms",
            ready,
            2,
            "{:.0f} ms",
            at_most(200),
        ),
        (
            "ready in the database → first chunk, no poke, p99",
            "≤ 1 s",
            ready,
            4,
            "{:.0f} ms",
            at_most(1000),
        ),
    ):
        s.add(figure, target, cell(section, row, column), fmt, met)


def record_latency(s: Summary) -> None:
    rec = figures("record_latency")
    for path, how in (("push", "the service pushes it"), ("sensor", "the sensor alone")):
        s.add(
            f"delivery by the service → its event on delivered_documents, max ({how})",
            "≤ 5 s",
            rec.get(f"{path}_max_s"),
            "{:.2f} s",
            at_most(5.0),
        )


# The summary's parts, in the table's order.
PARTS: tuple[Callable[[Summary], None], ...] = (
    throughput,
    pause,
    statements,
    claim_depth,
    fleet,
    several_numbers,
    arrivals,
    procrastinate_cpu,
    procrastinate_paced,
    procrastinate_rate_and_crashes,
    guard,
    memory,
    files,
    latencies,
    record_latency,
)


def summary_rows() -> list[Row]:
    summary = Summary()
    for part in PARTS:
        part(summary)
    return summary.rows


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
    parser = arguments(__doc__)
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
