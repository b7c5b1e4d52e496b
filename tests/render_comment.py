"""Render a PR comment (markdown) as GitHub renders it and screenshot it: cmark-gfm with GitHub's
extensions (tables, autolinks, strikethrough, the tag filter; raw HTML such as <details> kept), a page
styled like a GitHub comment, headless Chromium (tests/browser.py) with an emoji font, so ✅ and ❌
show as emoji, not empty boxes (Debian: apt-get install cmark-gfm chromium fonts-noto-color-emoji).

    python tests/render_comment.py report.md docs/comment-blocked.png [--open-details]

The demo's comment: ``rageval gate --config examples/banhang/rageval-800.yml --subset pr --baseline
baseline.json --report-md report.md`` after ``rageval baseline --config examples/banhang/rageval.yml
--subset pr --out baseline.json``.
"""

from __future__ import annotations

import argparse
import html
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from browser import Browser  # noqa: E402 - tests/ is on sys.path from here

EXTENSIONS = ("table", "autolink", "strikethrough", "tagfilter", "tasklist")
PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>
body {{ margin: 0; background: #fff; }}
.comment {{ width: 880px; margin: 16px; border: 1px solid #d0d7de; border-radius: 6px;
  font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif, "Noto Color Emoji";
  color: #1f2328; }}
.head {{ background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 8px 16px; color: #59636e; }}
.body {{ padding: 16px; }}
h3 {{ font-size: 1.25em; margin: 0 0 16px; }} h4 {{ margin: 16px 0 8px; }}
table {{ border-collapse: collapse; margin: 0 0 16px; }}
th, td {{ border: 1px solid #d0d7de; padding: 6px 13px; }} tr:nth-child(2n) {{ background: #f6f8fa; }}
code, pre {{ font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 85%; }}
pre {{ background: #f6f8fa; padding: 16px; border-radius: 6px; overflow: auto; }}
details {{ margin: 0 0 16px; }} summary {{ cursor: pointer; }} ul {{ padding-left: 2em; }}
</style></head><body><div class="comment"><div class="head"><b>github-actions</b> bot commented</div>
<div class="body">{body}</div></div></body></html>"""


def render(markdown: str) -> str:
    args = ["cmark-gfm", "--unsafe", *(a for e in EXTENSIONS for a in ("-e", e))]
    return subprocess.run(args, input=markdown.encode("utf-8"), capture_output=True, check=True).stdout.decode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("markdown", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--open-details", action="store_true", help="open every <details> before the shot")
    args = parser.parse_args()
    body = render(args.markdown.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        page_path = Path(tmp) / "comment.html"
        page_path.write_text(PAGE.format(body=body), encoding="utf-8")
        with Browser(width=940, height=900) as browser:
            page = browser.open(page_path)
            if args.open_details:
                page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            page.evaluate("document.fonts.ready.then(() => true)")
            page.screenshot(args.png)
    print(f"wrote {args.png} ({html.escape(str(args.png.stat().st_size))} bytes)")


if __name__ == "__main__":
    main()
