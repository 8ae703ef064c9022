"""The full ``mbsim verify`` run as a benchmark section of BENCHMARKS.md (issue 14).

    python benchmarks/verify.py                          # every shipped problem, full length (~45 min)
    python benchmarks/verify.py --from-json A.json ...   # the section from saved `mbsim verify --json`
                                                         # outputs (rows of several runs merged)

It rewrites only its own section of BENCHMARKS.md, between the markers below; ``benchmarks/run.py``
keeps that section as it is when it rewrites the rest (the full verify run is too long to repeat
with every benchmark run). The table is the one ``mbsim verify`` prints: problem, source, method,
compared quantity, error, tolerance, outcome and wall time.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- verify:begin -->", "<!-- verify:end -->"


def section(rows: list[dict], created: str, seconds: float | None) -> list[str]:
    from mbsim.output.tables import cell, markdown_rows

    took = f", {seconds / 60:.0f} min" if seconds else ""
    out = [
        BEGIN,
        "## 14. Verification: `mbsim verify` (full run)",
        "",
        f"`python benchmarks/verify.py` on {created} ({platform.processor() or platform.machine()}, one process"
        f"{took}); the same table as `mbsim verify` prints. `expected`: the method refuses the problem as "
        "the problem says it must (not a pass). Wall: the run's own wall time, seconds.",
        "",
    ]

    def method(r: dict) -> str:
        own = r.get("overrides") or []
        return f"`{r['method']}`" + (f" ({', '.join(own)})" if own else "")

    body = [
        [r["problem"], r["source"], method(r), r["quantity"], cell(r["error"], ".2e"), cell(r["tolerance"], ".0e"),
         r["outcome"], cell(r["wall_time_s"], ".1f")]
        for r in rows
    ]  # fmt: skip
    headers = ["problem", "source", "method", "quantity", "error", "tolerance", "outcome", "wall [s]"]
    out += markdown_rows(headers, [False, False, False, False, True, True, False, True], body)
    counts = {k: sum(r["outcome"] == k for r in rows) for k in ("pass", "expected", "fail")}
    out += ["", f"{counts['pass']} passed, {counts['expected']} failed as expected, {counts['fail']} failed."]
    for r in rows:
        if r["outcome"] == "fail":
            checks = [f"{c['label']} {c['error']:.3g} > {c['tolerance']:g}" for c in r["checks"] if not c["passed"]]
            out.append(f"- {r['problem']} `{r['method']}`: {r['message'] or '; '.join(checks)}")
    return [*out, END]


def write_section(lines: list[str], path: Path) -> None:
    """Replace the marked section of ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def kept_section(path: Path) -> str:
    """The marked section of an existing BENCHMARKS.md ('' if none): benchmarks/run.py keeps it."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    if BEGIN in text and END in text:
        return text[text.index(BEGIN) : text.index(END) + len(END)]
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from-json", nargs="+", default=None, help="saved `mbsim verify --json` outputs")
    parser.add_argument("--output", default=str(ROOT / "BENCHMARKS.md"), help="the markdown file to update")
    args = parser.parse_args(argv)
    seconds = None
    if args.from_json:
        reports = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.from_json]
        created = max(r["created"] for r in reports)
    else:
        from mbsim.verify.problem import find_problems
        from mbsim.verify.runner import verify

        started = time.perf_counter()
        result = verify(find_problems([]), note=lambda text: print(text, flush=True))
        seconds = time.perf_counter() - started
        reports = [result.to_dict()]
        created = result.created
    rows = [row for report in reports for row in report["rows"]]
    when = _dt.datetime.fromisoformat(created).strftime("%Y-%m-%d %H:%M")
    lines = section(rows, when, seconds)
    print("\n".join(lines))
    write_section(lines, Path(args.output))
    print(f"wrote {args.output}")
    return 0 if all(r["outcome"] != "fail" for r in rows) else 4


if __name__ == "__main__":
    sys.exit(main())
