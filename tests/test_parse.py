"""Strict, bounded reading of every input file (rageval.parse), through the public loaders and the CLI.

Each broken file is a real file in a small replay project; the loader that reads it must raise the
right error naming the file and the line (or key), and `rageval validate` must exit 2 with one
ERROR line. Hostile inputs (an alias bomb, a 100,000-deep document) must fail fast in little memory.
"""

import json
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

import rageval.parse as parse
from rageval.config import load_config
from rageval.errors import ConfigError, DatasetError
from rageval.golden.corpus import load_corpus
from rageval.golden.set import load_golden
from rageval.parse import MAX_DEPTH, load_json, load_yaml, load_yaml_node
from rageval.pipeline.apps.replay import load_traces

CONFIG = "golden: {golden}\ncorpus: docs/*\napp: {{type: replay, path: traces.jsonl}}\n"
GOLDEN_YAML = ("dataset: t\nversion: 1\ncases:\n"
               "  - id: q01\n    question: Trả hàng trong mấy ngày?\n    expected_sections: [DT-1]\n")
GOLDEN_JSON = '{\n "dataset": "t",\n "version": 1,\n "cases": [{"id": "q01", "question": "Q?", "expected_sections": ["DT-1"]}]\n}\n'
POLICY_MD = "# Đổi trả\n\n## DT-1 Thời hạn\nTrong 7 ngày.\n\n## DT-2 Phí\n30.000 đồng.\n"
TRACE = '{"id": "q01", "answer": "Trong 7 ngày.", "retrieved": [{"chunk_id": "c1", "sections": ["DT-1"], "score": 0.9}]}'

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_YAML = "a: " + "[" * 100_000 + "]" * 100_000 + "\n"
BOMB = ('a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
        + "".join(f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcdefgh", "bcdefghi")))


def write_project(root: Path, golden: str = "golden.yaml") -> Path:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "policy.md").write_text(POLICY_MD, encoding="utf-8")
    (root / "golden.yaml").write_text(GOLDEN_YAML, encoding="utf-8")
    (root / "golden.json").write_text(GOLDEN_JSON, encoding="utf-8")
    (root / "traces.jsonl").write_text(TRACE + "\n", encoding="utf-8")
    (root / "rageval.yml").write_text(CONFIG.format(golden=golden), encoding="utf-8")
    return root / "rageval.yml"


def load(config: Path, name: str) -> None:
    """Read the file ``name`` of the project through its public loader."""
    root = config.parent
    if name == "rageval.yml":
        load_config(config)
    elif name.startswith("golden"):
        load_golden(root / name)
    elif name.startswith("docs/"):
        load_corpus("docs/*", root)
    else:
        load_traces(root / name)


CFG = "golden: golden.yaml\ncorpus: docs/*\n"
BROKEN = [
    # (file, content, error, fragments the one message must contain)
    ("rageval.yml", CFG + "gate: {floors: {pass_rate: 1.1}}\ngate: {}\n", ConfigError,
     ["line 4: key 'gate' appears twice", "lines 3 and 4"]),
    ("rageval.yml", CFG + "gate:\n  floors:\n    hit@3: 0.9\n    mrr@5: 0.8\n    hit@3: 0.5\n", ConfigError,
     ["line 7: key 'hit@3' appears twice", "lines 5 and 7"]),
    ("rageval.yml", CFG + "report: {title: &t x}\napp: {url: *t}\n", ConfigError, ["line 4: YAML alias '*t'"]),
    ("rageval.yml", CFG + BOMB, ConfigError, ["line 4: YAML alias '*a'"]),
    ("rageval.yml", CFG + "gate: " + "{a: " * 100 + "1" + "}" * 100 + "\n", ConfigError,
     ["line 3: nested more than 64 levels"]),
    ("rageval.yml", CFG.encode() + b"report: {title: caf\xe9}\n", ConfigError, ["not UTF-8 text (byte 54, line 3)"]),
    ("rageval.yml", CFG + "report: {title: a\x07b}\n", ConfigError, ["line 3: character U+0007"]),
    ("rageval.yml", CFG + "---\nreport: {}\n", ConfigError, ["line 3: a second YAML document"]),
    ("rageval.yml", CFG + "gate: {floors: {pass_rate: .nan}}\n", ConfigError,
     ["line 3", "'gate.floors.pass_rate' must be a finite number, got nan"]),
    ("rageval.yml", CFG + "gate: {floors: {pass_rate: 1.1}}\n", ConfigError,
     ["line 3", "'gate.floors.pass_rate' must be a number between 0 and 1"]),
    ("rageval.yml", CFG + "gate:\n  noise_k: .inf\n", ConfigError, ["line 4", "'gate.noise_k' must be a finite number"]),
    ("rageval.yml", CFG + "embedding: {dim: 100000000000}\n", ConfigError,
     ["line 3", "'embedding.dim' must be an integer from 16 to 1048576"]),
    ("rageval.yml", CFG + "app: {type: command, command: \"'x\"}\n", ConfigError,
     ["line 3", "app.command: cannot split", "No closing quotation"]),
    ("rageval.yml", CFG + "app: {type: http, url: not a url}\n", ConfigError,
     ["line 3", "'app.url' must be an http(s) URL with a host"]),
    ("rageval.yml", CFG + "report: {max_cases: 2024-13-45}\n", ConfigError, ["line 3: this value cannot be read"]),
    ("golden.yaml", GOLDEN_YAML.replace("version: 1\n", "version: 1\nversion: 2\n"), DatasetError,
     ["line 3: key 'version' appears twice", "lines 2 and 3"]),
    ("golden.yaml", GOLDEN_YAML + "    question: again?\n", DatasetError,
     ["line 7: key 'question' appears twice", "lines 5 and 7"]),
    ("golden.yaml", GOLDEN_YAML + "  - &c {id: q02, question: Q?, expected_sections: [DT-1]}\n  - *c\n", DatasetError,
     ["line 8: YAML alias '*c'"]),
    ("golden.yaml", BOMB, DatasetError, ["line 2: YAML alias '*a'"]),
    ("golden.yaml", DEEP_YAML, DatasetError, ["line 1: nested more than 64 levels"]),
    ("golden.json", GOLDEN_JSON.replace(' "version": 1,\n', ' "version": 1,\n "version": 2,\n'), DatasetError,
     ["line 4: key 'version' appears twice", "lines 3 and 4"]),
    ("golden.json", GOLDEN_JSON.replace('"Q?"', '"Q?", "slice": {"w": NaN}'), DatasetError,
     ["line 4: NaN is not a finite number"]),
    ("golden.json", GOLDEN_JSON.replace('"version": 1', '"version": 1e999'), DatasetError,
     ["line 3: 1e999 is not a finite number"]),
    ("golden.json", DEEP_JSON, DatasetError, ["line 1: nested more than 64 levels"]),
    ("golden.json", GOLDEN_JSON.encode().replace(b'"Q?"', b'"Q\xff"'), DatasetError, ["not UTF-8 text (byte 73, line 4)"]),
    ("docs/extra.yaml", "DT-8: a\nDT-9: b\nDT-8: c\n", DatasetError,
     ["extra.yaml: line 3: key 'DT-8' appears twice", "lines 1 and 3"]),
    ("docs/extra.json", '{"DT-8": "a",\n "DT-8": "b"}', DatasetError,
     ["extra.json: line 2: key 'DT-8' appears twice", "lines 1 and 2"]),
    ("docs/extra.json", '{"DT-8": "a",\n "DT-9": {"text": "b", "w": -Infinity}}', DatasetError,
     ["extra.json: line 2: -Infinity is not a finite number"]),
    ("docs/extra.yaml", "DT-8: &x a\nDT-9: *x\n", DatasetError, ["extra.yaml: line 2: YAML alias '*x'"]),
    ("docs/notes.md", "## DT-8 Ghi chú\nđ".encode() + b"\xc3(\n", DatasetError, ["notes.md: not UTF-8 text (byte 19, line 2)"]),
    ("docs/blob.bin", b"\x7fELF\x02\x01\x01\x00\x00\x00", DatasetError, ["blob.bin: line 1: a NUL byte"]),
    ("traces.jsonl", TRACE + '\n{"id": "q02", "answer": "a",\t"answer": "b"}\n', DatasetError,
     ["traces.jsonl: line 2: key 'answer' appears twice", "lines 2 and 2"]),
    ("traces.jsonl", '\n\n' + TRACE.replace("0.9", "NaN") + "\n", DatasetError,
     ["traces.jsonl: line 3: NaN is not a finite number"]),
    ("traces.jsonl", (TRACE + "\n" + TRACE.replace("q01", "q02") + "\n").encode() + b'{"id": "q\xff"}\n', DatasetError,
     ["traces.jsonl: not UTF-8 text (byte 235, line 3)"]),
    ("traces.jsonl", TRACE + "\n" + DEEP_JSON + "\n", DatasetError, ["traces.jsonl: line 2: nested more than 64 levels"]),
]


def _id(entry):
    return f"{entry[0]}:{entry[3][0][:40]}"


@pytest.mark.parametrize("name, content, error, fragments", BROKEN, ids=[_id(b) for b in BROKEN])
def test_a_broken_file_fails_its_loader_naming_file_and_line(tmp_path, name, content, error, fragments):
    config = write_project(tmp_path, "golden.json" if name == "golden.json" else "golden.yaml")
    target = tmp_path / name
    target.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(error) as info:
        load(config, name)
    message = str(info.value)
    assert message.startswith(str(target)), message
    for fragment in fragments:
        assert fragment in message


@pytest.mark.parametrize("name, content, error, fragments", BROKEN, ids=[_id(b) for b in BROKEN])
def test_validate_exits_2_with_one_error_line(tmp_path, run_cli, name, content, error, fragments):
    config = write_project(tmp_path, "golden.json" if name == "golden.json" else "golden.yaml")
    (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 2, err
    assert err.startswith("ERROR ") and len(err.strip().splitlines()) == 1, err  # one message, no traceback
    assert name.split("/")[-1] in err and fragments[0] in err


def test_the_valid_project_loads(tmp_path, run_cli):
    for golden in ("golden.yaml", "golden.json"):
        config = write_project(tmp_path / golden, golden)
        code, out, err = run_cli("validate", "--config", config, "--no-git")
        assert code == 0, err
        assert load_golden(config.parent / golden).cases[0].id == "q01"


@pytest.mark.parametrize("name, content, loader, error", [
    ("rageval.yml", CFG + BOMB, load_config, ConfigError),
    ("rageval.yml", CFG + "gate: " + "[" * 100_000 + "]" * 100_000 + "\n", load_config, ConfigError),
    ("golden.yaml", BOMB, load_golden, DatasetError),
    ("golden.yaml", "- " * 100_000 + "x\n", load_golden, DatasetError),
    ("golden.json", DEEP_JSON, load_golden, DatasetError),
    ("golden.json", '{"a": ' * 100_000 + "1" + "}" * 100_000, load_golden, DatasetError),
    ("traces.jsonl", DEEP_JSON + "\n", load_traces, DatasetError),
])
def test_hostile_documents_fail_fast_in_little_memory(tmp_path, name, content, loader, error):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(error, match=r"line \d+: (nested more than 64 levels|YAML alias)"):
            loader(path)
        seconds = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # CPU seconds (under tracemalloc, which slows every allocation): 0.4-0.9 s here; an expanding
    # alias or a recursive descent takes minutes or dies, so the bound only has to tell those apart
    # from a refusal, whatever else the machine is doing
    assert seconds < 10.0, seconds
    assert peak < 40 * 2**20, peak  # the text itself is 200 KB; nothing is built from it


def test_a_corpus_glob_over_binary_files_is_a_clear_error(tmp_path, run_cli):
    config = write_project(tmp_path)
    (tmp_path / "rageval.yml").write_text(CONFIG.format(golden="golden.yaml").replace("docs/*", "/etc/*"),
                                          encoding="utf-8")
    code, _, err = run_cli("validate", "--config", config, "--no-git")
    assert code == 2 and err.startswith("ERROR ") and len(err.strip().splitlines()) == 1, err


# --- the API, directly ---------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ('{"a": {"b": 1,\n"c": [1, "{\\"b\\": [", {"b": 2}],\n"b": 3}}', r"^f: line 3: key 'b' appears twice .*lines 1 and 3"),
    ('{"k\\u0065y": 1,\n "key": 2}', r"^f: line 2: key 'key' appears twice .*lines 1 and 2"),
    ('{"s": "NaN Infinity",\n "n": Infinity}', r"^f: line 2: Infinity is not a finite number"),
    ('{"s": "-1e999",\n "n": [1, -1e999]}', r"^f: line 2: -1e999 is not a finite number"),
    ('{"a": 1,\n "b": }', r"^f: line 2: not valid JSON: Expecting value \(column 7\)"),
    ('{"a": "\\' + '"\\' * 50_000, r"^f: line 1: not valid JSON"),   # broken escapes: still linear
    ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), r"^f: line 1: nested more than 64 levels"),
    ("1" * 5000, r"^f: line \?: not valid JSON: Exceeds the limit"),
])
def test_load_json_refuses(text, message):
    with pytest.raises(DatasetError, match=message):
        load_json(text, "f", error=DatasetError)


def test_load_json_counts_lines_from_where_the_text_starts():
    with pytest.raises(ConfigError, match=r"^t.jsonl: line 42: key 'a' appears twice \(lines 41 and 42\)"):
        load_json('{"a": 1,\n"a": 2}', "t.jsonl", error=ConfigError, line=41)


def test_a_nul_or_a_bad_byte_is_named_at_the_files_line_too():
    with pytest.raises(DatasetError, match=r"^t.jsonl: line 7: a NUL byte"):
        load_json('{"a": "x\x00"}', "t.jsonl", error=DatasetError, line=7)
    with pytest.raises(DatasetError, match=r"^t.jsonl: not UTF-8 text \(byte 8, line 8\)"):
        load_json(b'{"a":\n "\xff"}', "t.jsonl", error=DatasetError, line=7)


def test_load_json_accepts_what_json_allows():
    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "f", error=DatasetError) == eval("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert load_json('\ufeff{"a": "[{NaN", "b": [1e308, -0.0]}'.encode(), "f", error=DatasetError) == \
        {"a": "[{NaN", "b": [1e308, -0.0]}
    assert load_json('{"a": {"x": 1}, "b": {"x": 2}}', "f", error=DatasetError) == {"a": {"x": 1}, "b": {"x": 2}}
    brackets_in_strings = json.dumps({"a": '\\"' + "[{" * 100 + '"\\', "b": ["]}" * 100]})
    assert load_json(brackets_in_strings, "f", error=DatasetError) == json.loads(brackets_in_strings)


def pure_loader(monkeypatch):
    monkeypatch.setattr(parse, "_StrictLoader", type("PureStrict", (parse._Strict, yaml.SafeLoader), {}))


YAML_REFUSED = [
    ("a: 1\nb: 2\na: 3\n", "line 3: key 'a' appears twice (lines 1 and 3)"),
    ("a: 1\n'a': 2\n", "line 2: key 'a' appears twice"),
    ("1: x\n0x1: y\n", "line 2: key '1' appears twice"),
    ("a: &x {b: 1}\nc: *x\n", "line 2: YAML alias '*x'"),
    (BOMB, "line 2: YAML alias '*a'"),
    (DEEP_YAML, "line 1: nested more than 64 levels"),
    ("x:\n" + "".join(" " * n + f"k{n}:\n" for n in range(1, 80)), "line 65: nested more than 64 levels"),
    ("a: 1\n---\nb: 2\n", "line 2: a second YAML document"),
    ("a: 2024-02-30\n", "line 1: this value cannot be read (day is out of range for month)"),
    ("a: ok\nb: \x1b[0m\n", "line 2: character U+001B is not allowed in YAML"),
]


@pytest.mark.parametrize("loader", ["c", "pure"])
@pytest.mark.parametrize("text, message", YAML_REFUSED)
def test_load_yaml_refuses_the_same_with_either_parser(monkeypatch, loader, text, message):
    if loader == "pure":
        pure_loader(monkeypatch)
    elif not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML without libyaml")
    with pytest.raises(DatasetError) as info:
        load_yaml(text, "f.yml", error=DatasetError)
    assert str(info.value).startswith(f"f.yml: {message}"), str(info.value)


@pytest.mark.parametrize("path", ["examples/banhang/golden.yaml", "examples/banhang/rageval.yml"])
def test_either_parser_gives_the_same_data_and_lines(monkeypatch, path):
    from conftest import ROOT
    data = (ROOT / path).read_bytes()
    c_data, c_node = load_yaml_node(data, path, error=DatasetError)
    pure_loader(monkeypatch)
    pure_data, pure_node = load_yaml_node(data, path, error=DatasetError)
    assert c_data == pure_data == yaml.safe_load(data)
    assert parse.key_lines(c_node) == parse.key_lines(pure_node)
    assert [n.start_mark.line for n in _items(c_node)] == [n.start_mark.line for n in _items(pure_node)]


def _items(node):
    return [value for _, value in node.value] if isinstance(node, yaml.MappingNode) else []


def test_yaml_safe_types_merge_keys_and_anchors_without_aliases_still_load():
    text = "<<: {a: 1}\nb: &anchor [1, 2.5, ~, yes, off]\nc: !!binary aGk=\nd: 2024-01-01\ne: .nan\n"
    data = load_yaml(text, "f.yml", error=DatasetError)
    assert data["a"] == 1 and data["b"] == [1, 2.5, None, True, False] and data["c"] == b"hi"
    assert str(data["d"]) == "2024-01-01" and data["e"] != data["e"]
    assert load_yaml("", "f.yml", error=DatasetError) is None


def test_parse_yaml_raises_yaml_errors_for_callers_that_word_their_own():
    with pytest.raises(yaml.YAMLError, match="key 'a' appears twice"):
        parse.parse_yaml("a: 1\na: 2\n")


def test_read_bytes_names_an_unreadable_file(tmp_path):
    (tmp_path / "folder").mkdir()
    with pytest.raises(DatasetError, match=r"folder: cannot read the file \(Is a directory\)"):
        parse.read_bytes(tmp_path / "folder", error=DatasetError)


def test_read_bytes_with_a_limit_reads_only_a_regular_file_within_it(tmp_path):
    (tmp_path / "ok.json").write_bytes(b"x" * 10)
    assert parse.read_bytes(tmp_path / "ok.json", error=DatasetError, limit=10) == b"x" * 10
    with pytest.raises(DatasetError, match=r"ok\.json: more than 9 bytes"):
        parse.read_bytes(tmp_path / "ok.json", error=DatasetError, limit=9)
    (tmp_path / "link.json").symlink_to(tmp_path / "ok.json")
    assert parse.read_bytes(tmp_path / "link.json", error=DatasetError, limit=10) == b"x" * 10
    with pytest.raises(DatasetError, match=r"link\.json: not a regular file but a symbolic link"):
        parse.read_bytes(tmp_path / "link.json", error=DatasetError, links=False)
    (tmp_path / "zero").symlink_to("/dev/zero")      # would never end
    with pytest.raises(DatasetError, match=r"zero: not a regular file but a character device"):
        parse.read_bytes(tmp_path / "zero", error=DatasetError, limit=10)


def test_shown_cuts_long_values():
    assert parse.shown("x" * 500).endswith("…") and len(parse.shown("x" * 500)) == 80
    assert parse.shown(0.5) == "0.5"
    assert not parse.finite(10**400) and not parse.finite(float("nan")) and parse.finite(10**20)
