import json


def test_judge_agreement_from_a_run_result(seed_project, run_cli, tmp_path):
    result_path = tmp_path / "r.json"
    run_cli("run", "--config", seed_project["chunk-800"], "--out", result_path)
    result = json.loads(result_path.read_text(encoding="utf-8"))
    judge = {"q01": "fail", "q02": "pass", "q03": "pass", "q04": "pass", "q05": "pass"}
    for case in result["cases"]:
        case["checks"]["judge"] = {"status": judge[case["id"]], "passed": judge[case["id"]] == "pass",
                                   "score": None, "reason": ""}
    result_path.write_text(json.dumps(result), encoding="utf-8")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": i, "label": l}) + "\n" for i, l in
                              [("q01", "fail"), ("q02", "pass"), ("q03", "fail"), ("q04", "pass"), ("q05", "pass")]))
    out = tmp_path / "agreement.json"
    code, stdout, _ = run_cli("judge-agreement", "--config", seed_project["chunk-800"], "--labels", labels,
                              "--results", result_path, "--out", out)
    assert code == 0
    # a=3 both pass, b=0, c=1 (human fail, judge pass: q03), d=1 → po=0.8, pe=(3·4+2·1)/25=0.56, κ=0.24/0.44
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["agreement"] == 0.8
    assert abs(report["kappa"] - 0.24 / 0.44) < 1e-6   # reported to 6 decimals
    assert report["disagreements"] == ["q03"]
    assert "disagree q03: human fail, judge pass" in stdout
