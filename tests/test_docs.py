"""What the README promises stays true."""

import re

from conftest import ROOT

from rageval.metrics.registry import metrics_table_markdown


def test_readme_metric_table_is_generated_from_the_registry():
    assert metrics_table_markdown() in (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = re.search(r"```bash\n(python3 -m venv .venv && .venv/bin/pip install -e '\.\[test,e5\]' && .venv/bin/python -m pytest)\n```", readme)
    assert command, "README lost its test command"
    for part in command.group(1).split(" && "):
        assert part.replace(".venv/bin/pip install", ".venv/bin/pip install --quiet") in ci or part in ci, part


def test_every_test_file_the_docs_name_exists():
    texts = [(ROOT / "README.md").read_text(encoding="utf-8"),
             *(p.read_text(encoding="utf-8") for p in (ROOT / "docs").glob("*.md"))]
    named = {m for text in texts for m in re.findall(r"tests/[\w/]+\.py", text)}
    assert named and all((ROOT / m).is_file() for m in named), sorted(m for m in named if not (ROOT / m).is_file())


def _anchors(text: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens (outside code)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in re.findall(r"^#+ (.*)$", text, re.M)}


def test_every_relative_link_of_the_readme_and_docs_resolves():
    """The README keeps the first steps and a map; the reference lives in docs/. A link into a moved
    section (file or anchor) that no longer exists is a dead end for the reader."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    dead = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", text, flags=re.S)):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                dead.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text(encoding="utf-8")):
                dead.append(f"{page.name}: {target} (no such heading)")
    assert dead == []
