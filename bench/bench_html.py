"""Benchmark of the one-file HTML report (issue #24): page size and render time at 1,000 and 5,000
cases, and the screenshot of the demo's blocked gate in docs/.

    python bench/bench_html.py                          # 1,000 and 5,000 cases, 3 runs each
    python bench/bench_html.py --cases 1000 --runs 1
    python bench/bench_html.py --json bench/results-html.json
    python bench/bench_html.py --screenshot docs/report-blocked.png   # the demo's blocked gate (and
                                                                      # docs/report-blocked-case.png: q01 open)

Each size is a real gate on a synthetic project (bench/synthetic.py: N cases over N policy-like
sections; main at 200-token chunks, the PR at 400, gated on floors, max_drop and zero tolerance):
the baseline and the PR run through rageval.flow like `rageval gate`, then the page is rendered
(``render_html``, median wall and CPU seconds in this process) and its bytes counted — the whole file, and
the case data as JSON before and after compression. The page is then opened from file:// in
headless Chromium (tests/browser.py, Debian's ``chromium``), a fresh tab per run: "ready" is
``performance.now()`` when the page's script has read the data and wired the table (the page
records it in ``data-ready-ms``), "load" the navigation's load event; "filter" is one search over
every case, "open" showing one case's detail until the next frame is drawn, both timed inside the page.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "tests")]

from browser import Browser, find_chromium  # noqa: E402 - tests/ is on sys.path from here
from synthetic import write_project  # noqa: E402

from rageval import flow  # noqa: E402
from rageval.cli import main as cli  # noqa: E402
from rageval.config import load_config  # noqa: E402
from rageval.gate.page import render_html  # noqa: E402
from rageval.gate.page.render import decode_data  # noqa: E402
from rageval.pipeline.runner import prepare  # noqa: E402

GATE = ("gate: {floors: {hit@3: 0.5}, max_drop: {mrr@5: 0.03, pass_rate: 0.05}, zero_tolerance: [numbers]}\n"
        "attribution: {run: off}\n")
FILTER = ("(() => { const q = document.getElementById('f-q'); const t = performance.now(); q.value = 'trong 7 ngay';"
          " q.dispatchEvent(new Event('input')); return performance.now() - t; })()")
OPEN = ("(async () => { const t = performance.now(); location.hash = 'case=' + encodeURIComponent(ID);"
        " while (!document.querySelector('.case-detail')) { await new Promise(r => setTimeout(r, 0)); }"
        " await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));"   # until the frame is painted
        " return performance.now() - t; })()")


def gate_of(folder: Path, n: int) -> tuple:
    """(verdict, baseline, candidate) of the synthetic gate with ``n`` cases."""
    base_cfg = write_project(folder, n, n)
    text = base_cfg.read_text(encoding="utf-8") + GATE
    base_cfg.write_text(text, encoding="utf-8")
    pr_cfg = folder / "rageval-pr.yml"
    pr_cfg.write_text(text.replace("chunking: {size: 200}", "chunking: {size: 400}"), encoding="utf-8")
    baseline = flow.run_repeats(prepare(load_config(base_cfg), env={}), 1)
    cfg = load_config(pr_cfg)
    outcome = flow.gate(cfg, baseline, evaluation=prepare(cfg, env={}))
    return outcome.verdict, outcome.baseline, outcome.candidate


def measure(n: int, runs: int, browser: Browser | None, tmp: Path) -> dict:
    verdict, baseline, candidate = gate_of(tmp / f"p{n}", n)
    times, cpu, html = [], [], ""
    for _ in range(runs):
        started, started_cpu = time.perf_counter(), time.process_time()
        html = render_html(candidate, baseline=baseline, verdict=verdict)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    encoding, block = html.split('id="rageval-data" data-encoding="', 1)[1].split('">', 1)
    block = block.split("</script>", 1)[0]
    data = decode_data(encoding, block)
    out = {"cases": n, "verdict": verdict.verdict, "pass_to_fail": len(verdict.pass_to_fail),
           "render_s": round(statistics.median(times), 3), "render_cpu_s": round(statistics.median(cpu), 3),
           "page_bytes": len(html.encode()),
           "data_json_bytes": len(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()),
           "data_block_bytes": len(block.encode()), "data_encoding": encoding}
    if browser is not None:
        page_path = tmp / f"page{n}.html"
        page_path.write_text(html, encoding="utf-8")
        ready, load, filt, opened = [], [], [], []
        for _ in range(runs):
            page = browser.open(page_path)
            page.wait_for("document.documentElement.getAttribute('data-ready')", timeout=120)
            assert page.errors == [], page.errors
            ready.append(float(page.evaluate("document.documentElement.getAttribute('data-ready-ms')")))
            load.append(page.evaluate("performance.getEntriesByType('navigation')[0].loadEventEnd"))
            filt.append(page.evaluate(FILTER))
            page.evaluate("document.getElementById('f-q').value = ''; "
                          "document.getElementById('f-q').dispatchEvent(new Event('input'))")
            opened.append(page.evaluate(OPEN.replace("ID", json.dumps(data["cases"][n // 2]["id"]))))
            page.send("Page.close")
        out.update({"ready_ms": round(statistics.median(ready)), "load_ms": round(statistics.median(load)),
                    "filter_ms": round(statistics.median(filt), 1), "open_ms": round(statistics.median(opened), 1)})
    return out


def screenshot(path: Path, tmp: Path) -> None:
    """The demo's blocked gate as the README runs it, its page's top in light mode."""
    demo = ROOT / "examples" / "banhang"
    assert cli(["baseline", "--config", str(demo / "rageval.yml"), "--subset", "pr", "--out", str(tmp / "b.json")]) == 0
    assert cli(["gate", "--config", str(demo / "rageval-800.yml"), "--subset", "pr", "--baseline", str(tmp / "b.json"),
                "--html", str(tmp / "gate.html")]) == 1
    case_path = path.with_name(path.stem + "-case" + path.suffix)
    with Browser(width=1200, height=1500) as browser:
        page = browser.open(tmp / "gate.html")
        page.wait_for("document.documentElement.getAttribute('data-ready')")
        page.screenshot(path, full_page=False, clip={"x": 0, "y": 0, "width": 1200, "height": 1500})
        page.evaluate("location.hash = 'case=q01'")        # the seed incident's case: 7 ngày → 30 ngày
        page.wait_for("!!document.querySelector('.case-detail')")
        top = page.evaluate("document.querySelector('tr.open').getBoundingClientRect().top + window.scrollY")
        page.screenshot(case_path, full_page=False, clip={"x": 0, "y": top - 8, "width": 1200, "height": 1100})
    print(f"wrote {path} and {case_path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", default=None, help="write the figures here")
    parser.add_argument("--screenshot", default=None, metavar="PNG", help="only take the demo's screenshot")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.screenshot:
            screenshot(Path(args.screenshot), Path(tmp))
            return 0
        chromium = find_chromium()
        if chromium is None:
            print("#### no Chromium: page sizes and render times only, no browser figures ####", file=sys.stderr)
        browser = Browser(chromium) if chromium else None
        try:
            figures = [measure(n, args.runs, browser, Path(tmp)) for n in args.cases]
        finally:
            if browser is not None:
                browser.close()
    result = {"python": platform.python_version(), "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
              "runs": args.runs, "chromium": chromium and Browser.version(chromium), "figures": figures}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
