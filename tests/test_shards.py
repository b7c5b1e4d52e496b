"""A run split over machines (issue 22 §5): `rageval run --shard i/N` runs the cases whose id hashes
to part i, `rageval merge` joins the N parts into the RunResult one run would have written (timings
and created_at aside) — also for a baseline with repeats, whose noise and flaky cases are the
whole's — and refuses anything that is not exactly the N parts of one run. The action runs the
same: `shard: i/N` in each matrix job, `mode: merge` in the last."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from conftest import DEMO
CLOCKS = ("timings", "created_at")


def comparable(path: Path) -> dict:
    """A RunResult without what the clock decides: the run's timings and created_at, each case's latency_ms."""
    data = json.loads(path.read_text(encoding="utf-8"))
    for key in CLOCKS:
        data.pop(key)
    for case in data["cases"]:
        case.pop("latency_ms")
    return data


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory, copy_demo):
    """The demo's pr subset run once whole and once in 4 parts (`rageval run --shard i/4`)."""
    from rageval.cli import main
    root = tmp_path_factory.mktemp("shards")
    project = copy_demo(root / "banhang")
    config = str(project / "rageval.yml")
    assert main(["run", "--config", config, "--subset", "pr", "--out", str(root / "whole.json")]) == 0
    parts = []
    for i in range(1, 5):
        parts.append(root / f"shard-{i}.json")
        assert main(["run", "--config", config, "--subset", "pr", "--shard", f"{i}/4", "--out", str(parts[-1])]) == 0
    return {"root": root, "project": project, "whole": root / "whole.json", "parts": parts}


def test_four_shards_merge_into_the_unsharded_run(demo_runs, run_cli):
    parts = [json.loads(p.read_text(encoding="utf-8")) for p in demo_runs["parts"]]
    ids = [[c["id"] for c in part["cases"]] for part in parts]
    assert all(ids) and sum(map(len, ids)) == 44 and len({i for part in ids for i in part}) == 44
    # the split is the sha256 of the id, computed here independently of rageval
    for n, part in enumerate(ids):
        assert all(int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") % 4 == n for i in part)
    out = demo_runs["root"] / "merged.json"
    code, stdout, _ = run_cli("merge", *reversed(demo_runs["parts"]), "--out", out)
    assert code == 0 and "merged 4 shards, 44 cases" in stdout
    assert comparable(out) == comparable(demo_runs["whole"])


def test_the_gate_reads_the_merged_run_as_the_whole(demo_runs, run_cli):
    out = demo_runs["root"] / "merged-for-gate.json"
    run_cli("merge", *demo_runs["parts"], "--out", out)
    config = demo_runs["project"] / "rageval.yml"
    whole = run_cli("gate", config, "--subset", "pr", "--candidate", demo_runs["whole"], "--out",
                    demo_runs["root"] / "v-whole.json")
    merged = run_cli("gate", config, "--subset", "pr", "--candidate", out, "--out", demo_runs["root"] / "v-merged.json")
    assert whole[0] == merged[0] == 0
    # a part alone is not a run: the gate refuses it instead of failing its missing cases
    code, _, err = run_cli("gate", config, "--subset", "pr", "--candidate", demo_runs["parts"][0])
    assert code == 2 and "is shard 1/4 of a run, not a run: join the parts with `rageval merge" in err


def test_merge_refuses_what_is_not_the_parts_of_one_run(demo_runs, run_cli, tmp_path):
    p1, p2, p3, p4 = demo_runs["parts"]
    out = tmp_path / "m.json"
    code, _, err = run_cli("merge", p1, p2, p3, "--out", out)
    assert code == 2 and "shards 4 of 4 are missing (given: 1/4, 2/4, 3/4)" in err and not out.exists()
    code, _, err = run_cli("merge", p1, p1, p2, p3, p4, "--out", out)
    assert code == 2 and "are both shard 1/4" in err
    code, _, err = run_cli("merge", demo_runs["whole"], "--out", out)
    assert code == 2 and "not a shard (no 'shard' key)" in err
    # a part relabelled as another part: its cases do not hash to it
    data = json.loads(p2.read_text(encoding="utf-8"))
    data["shard"] = {"index": 1, "count": 4}
    fake = tmp_path / "fake-1.json"
    fake.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_cli("merge", fake, p2, p3, p4, "--out", out)
    assert code == 2 and "are both shard" not in err and "hashes to shard 2, not 1/4" in err
    # a part of another run (another config): refused, naming the two files
    other = json.loads(p4.read_text(encoding="utf-8"))
    other["config_fingerprint"] = "0" * 64
    changed = tmp_path / "other-4.json"
    changed.write_text(json.dumps(other), encoding="utf-8")
    code, _, err = run_cli("merge", p1, p2, p3, changed, "--out", out)
    assert code == 2 and "other-4.json and" in err and "their config (config_fingerprint) differ" in err
    # a case lost from a part: the union is not the golden subset
    short = json.loads(p3.read_text(encoding="utf-8"))
    lost = short["cases"].pop()["id"]
    cut = tmp_path / "cut-3.json"
    cut.write_text(json.dumps(short), encoding="utf-8")
    code, _, err = run_cli("merge", p1, p2, cut, p4, "--out", out)
    assert code == 2 and f"missing {lost}" in err and "the golden set (subset pr) has 44" in err


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "a/b", "1", "1/1001"])
def test_a_bad_shard_argument_is_bad_input(run_cli, text):
    code, _, err = run_cli("run", DEMO, "--shard", text)
    assert code == 2 and f"--shard is {text!r}: write it as I/N" in err


APP = """\
import hashlib, json, os, sys
from pathlib import Path
counts = Path(os.environ["SHARD_TEST_COUNTS"])
for line in sys.stdin:
    req = json.loads(line)
    seen = counts / req["id"]
    attempt = int(seen.read_text()) + 1 if seen.exists() else 1
    seen.write_text(str(attempt))
    n = int(hashlib.sha256(req["id"].encode()).hexdigest(), 16)
    right = (n + attempt) % 3 != 0                      # some cases flip from one repeat to the next
    section = "S-%d" % (n % 6)
    ranking = ["S-9", section] if (n + attempt) % 2 else [section, "S-9"]
    print(json.dumps({"id": req["id"], "answer": "Trong %d ngày." % (7 if right else 30),
                      "retrieved": [{"chunk_id": s, "sections": [s], "text": s} for s in ranking]}), flush=True)
"""


def noisy_project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "app.py").write_text(APP, encoding="utf-8")
    (folder / "corpus.yaml").write_text("".join(f"S-{i}: Trong 7 ngày, mục {i}.\n" for i in range(10)),
                                        encoding="utf-8")
    cases = "".join(
        f"  - {{id: c{j:02d}, question: câu hỏi {j}, expected_sections: [S-{int(hashlib.sha256(f'c{j:02d}'.encode()).hexdigest(), 16) % 6}], "
        f"expected_answer: Trong 7 ngày., slice: {{type: {'a' if j % 3 else 'b'}}}}}\n" for j in range(30))
    (folder / "golden.yaml").write_text(f"dataset: noisy\nversion: 1\ncases:\n{cases}", encoding="utf-8")
    config = folder / "rageval.yml"
    config.write_text(f"golden: golden.yaml\ncorpus: corpus.yaml\nretrieval: {{k: [1, 2]}}\n"
                      f"app: {{type: command, command: [{sys.executable}, app.py], timeout_s: 20}}\n", encoding="utf-8")
    return config


def test_a_sharded_baseline_merges_into_the_whole_noise(tmp_path, run_cli, monkeypatch):
    config = noisy_project(tmp_path / "p")
    (tmp_path / "whole-counts").mkdir()
    monkeypatch.setenv("SHARD_TEST_COUNTS", str(tmp_path / "whole-counts"))
    assert run_cli("baseline", config, "--repeats", "3", "--out", tmp_path / "whole.json")[0] == 0
    (tmp_path / "part-counts").mkdir()
    monkeypatch.setenv("SHARD_TEST_COUNTS", str(tmp_path / "part-counts"))
    parts = []
    for i in (1, 2, 3):
        parts.append(tmp_path / f"part-{i}.json")
        assert run_cli("baseline", config, "--repeats", "3", "--shard", f"{i}/3", "--out", parts[-1])[0] == 0
    assert run_cli("merge", *parts, "--out", tmp_path / "merged.json")[0] == 0
    whole, merged = comparable(tmp_path / "whole.json"), comparable(tmp_path / "merged.json")
    assert whole["noise"]["runs_executed"] == 3 and whole["flaky"]           # the repeats differ: real noise
    assert any(v > 0 for v in whole["noise"]["sigma"].values())
    assert merged == whole


def test_the_action_runs_a_matrix_of_shards_and_merges_them(demo_runs, tmp_path):
    from action_harness import make_env, push_payload, run_action
    ws = demo_runs["project"]
    baseline = tmp_path / "baseline.json"
    baseline.write_bytes(demo_runs["whole"].read_bytes())
    for i in (1, 2, 3):
        env = make_env(ws, tmp_path, None, "push", push_payload("release/2.0"), "refs/heads/release/2.0",
                       config="rageval.yml", subset="pr", shard=f"{i}/3", results_path=f"parts/{i}/part.json")
        run = run_action(env)
        assert run.code == 0 and run.outputs["verdict"] == "none", run.out[-2000:]
        assert json.loads(run.file(f"parts/{i}/part.json"))["shard"] == {"index": i, "count": 3}
    env = make_env(ws, tmp_path, None, "push", push_payload("release/2.0"), "refs/heads/release/2.0",
                   config="rageval.yml", subset="pr", mode="merge", shards="parts/*/part.json",
                   baseline_path=str(baseline), results_path="merged.json")
    run = run_action(env)
    assert run.code == 0 and run.outputs["verdict"] == "pass", run.out[-3000:]
    merged = json.loads(run.file("merged.json"))
    whole = json.loads(demo_runs["whole"].read_text(encoding="utf-8"))
    assert [c["id"] for c in merged["cases"]] == [c["id"] for c in whole["cases"]]
    assert merged["summary"] == whole["summary"]
    env = make_env(ws, tmp_path, None, "push", push_payload("release/2.0"), "refs/heads/release/2.0",
                   config="rageval.yml", mode="merge", shards="nothing/*.json", baseline_path=str(baseline))
    run = run_action(env)
    assert run.code == 2 and "Input 'shards' is 'nothing/*.json': no file matches it" in run.out
