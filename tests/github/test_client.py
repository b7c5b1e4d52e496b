"""rageval.github.client against a fake GitHub over real HTTP on 127.0.0.1.

Every exchange is also checked against GitHub's REST description subset (both directions): the
responses the fake served and the request bodies, paths and query parameters the client sent.
"""

from __future__ import annotations

import io
import json
import logging
import os
import socket
import stat
import struct
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
import requests
from builders import case, run
from github_server import STORAGE_OPERATION, FakeGitHub, LoggedRequest

from rageval.errors import BaselineError, GithubError
from rageval.files import to_json
from rageval.github.baseline import (
    fetch_baseline,
    find_baseline_artifact,
    safe_extract_json,
)
from rageval.github.client import GitHubClient
from rageval.github.comment import (
    MARKER_TEMPLATE,
    MAX_COMMENT_CHARS,
    comment_marker,
    upsert_comment,
)
from rageval.results import RunResult

TOKEN = "ghp_SENTINEL_TOKEN_123"
NAME = "rag-eval-baseline"
NOW = datetime(2026, 9, 10, tzinfo=timezone.utc)
CLOCK = 1_800_000_000.0  # the client's fake "now" for rate-limit arithmetic

# ---------------------------------------------------------------------- the REST description

_SPEC_CANDIDATES = [
    os.environ.get("RAGEVAL_GITHUB_OPENAPI", ""),
    Path(__file__).parents[1] / "data" / "github-rest-subset" / "openapi-subset.json",
    Path(__file__).resolve().parents[3] / "shared" / "github-rest-subset" / "openapi-subset.json",
]


def _load_spec() -> dict | None:
    for candidate in _SPEC_CANDIDATES:
        if candidate and Path(candidate).is_file():
            return json.loads(Path(candidate).read_text(encoding="utf-8"))
    return None


SPEC = _load_spec()
needs_spec = pytest.mark.skipif(SPEC is None, reason="GitHub REST subset (openapi-subset.json) not found")


def operation_for(spec: dict, method: str, path: str) -> tuple[str, dict, dict[str, str]]:
    """(path template, operation, path params) of the subset operation serving method + path."""
    segments = path.strip("/").split("/")
    found = []
    for template, item in spec["paths"].items():
        op = item.get(method.lower())
        parts = template.strip("/").split("/")
        if op is None or len(parts) != len(segments):
            continue
        params: dict[str, str] = {}
        for want, got in zip(parts, segments, strict=True):
            if want.startswith("{") and want.endswith("}"):
                params[want[1:-1]] = got
            elif want != got:
                break
        else:
            found.append((len(params), template, op, params))
    if not found:
        raise AssertionError(f"{method} {path} is not an operation of the REST subset")
    _, template, op, params = min(found, key=lambda f: f[0])  # literal segments win
    return template, op, params


def _validate(schema: dict, instance: object, what: str) -> None:
    from openapi_schema_validator import OAS30Validator, oas30_format_checker

    errors = list(OAS30Validator(schema, format_checker=oas30_format_checker).iter_errors(instance))
    assert not errors, f"{what}: " + "; ".join(f"{list(e.absolute_path)}: {e.message[:200]}" for e in errors[:5])


def check_contract(spec: dict, log: list[LoggedRequest]) -> set[str]:
    """Validate every logged exchange against the subset; return the operation ids seen."""
    seen = set()
    for req in log:
        if req.operation == STORAGE_OPERATION:
            continue
        template, op, params = operation_for(spec, req.method, req.path)
        what = f"{req.method} {req.path} ({op['operationId']})"
        assert op["operationId"] == req.operation, what
        seen.add(op["operationId"])
        declared = {p["name"]: p for p in op.get("parameters", [])}
        for name, value in params.items():
            assert declared[name]["in"] == "path", what
            if declared[name]["schema"].get("type") == "integer":
                assert value.isdigit(), f"{what}: path parameter {name}={value!r} is not an integer"
        for name, values in req.query.items():
            assert name in declared and declared[name]["in"] == "query", f"{what}: unknown query {name}"
            if declared[name]["schema"].get("type") == "integer":
                assert all(v.isdigit() for v in values), f"{what}: {name}={values}"
        body_spec = op.get("requestBody")
        if body_spec:
            assert req.json is not None or not body_spec.get("required"), f"{what}: no request body"
            _validate(body_spec["content"]["application/json"]["schema"], req.json, f"{what} request")
        else:
            assert req.json is None, f"{what}: unexpected request body"
        if req.faulted:
            continue  # scripted faults (429, 500 …) are not in the description
        response = op["responses"].get(str(req.status))
        if response is None:
            # the description lists only some error codes per operation (no 401 on most);
            # an undocumented error must still be GitHub's "Basic Error" shape
            assert req.status >= 400, f"{what}: answered {req.status}, not documented"
            assert isinstance(req.response_json, dict), what
            assert isinstance(req.response_json.get("message"), str), what
            continue
        for header in response.get("headers", {}):
            if header != "Link":  # Link is only sent when there is another page
                assert header in req.response_headers, f"{what}: missing {header} header"
        content = (response.get("content") or {}).get("application/json")
        if content:
            _validate(content["schema"], req.response_json, f"{what} response {req.status}")
    return seen


# ---------------------------------------------------------------------- fixtures and helpers


class Sleeper:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def gh():
    with FakeGitHub(token=TOKEN) as fake:
        yield fake
        if SPEC is not None:
            check_contract(SPEC, fake.requests)


@pytest.fixture
def sleeper() -> Sleeper:
    return Sleeper()


@pytest.fixture
def client(gh: FakeGitHub, sleeper: Sleeper) -> GitHubClient:
    with GitHubClient(TOKEN, api_url=gh.api_url, timeout=5, sleep=sleeper, per_page=2,
                      clock=lambda: CLOCK) as c:
        yield c


def make_zip(members: dict[str, bytes]) -> bytes:
    """A zip of ``members``, the same bytes on every call (a fixed member date, not the clock's)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 9, 1, 0, 0, 0)), data,
                        compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def result_bytes(marker: str) -> bytes:
    """A real RunResult (one case) whose ``git_sha`` is ``marker``, as rageval writes it."""
    return to_json(run([case("q1")], sha=marker).to_dict(), compact=True).encode("utf-8")


def result_zip(marker: str) -> bytes:
    return make_zip({"runresult.json": result_bytes(marker)})


def raises_text(excinfo: pytest.ExceptionInfo) -> str:
    exc = excinfo.value
    return " ".join([str(exc), repr(exc), str(exc.args), str(getattr(exc, "tip", ""))])


# ---------------------------------------------------------------------- baseline artifacts


def _populate(gh: FakeGitHub) -> dict[str, dict]:
    """Artifacts in an order that is not newest-first; only 'new' and 'old' are usable."""
    arts = {}
    arts["old"] = gh.add_artifact(NAME, zip_bytes=result_zip("old"), created_at="2026-09-01T00:00:00Z")
    arts["fork"] = gh.add_artifact(NAME, zip_bytes=result_zip("fork"), created_at="2026-09-07T00:00:00Z",
                                   head_repository_id=99999)
    arts["expired"] = gh.add_artifact(NAME, zip_bytes=result_zip("expired"), expired=True,
                                      created_at="2026-09-05T00:00:00Z", expires_at="2026-09-06T00:00:00Z")
    arts["new"] = gh.add_artifact(NAME, zip_bytes=result_zip("new"), created_at="2026-09-03T00:00:00Z")
    arts["lapsed"] = gh.add_artifact(NAME, zip_bytes=result_zip("lapsed"), created_at="2026-09-04T00:00:00Z",
                                     expires_at="2026-09-09T00:00:00Z")
    arts["feature"] = gh.add_artifact(NAME, zip_bytes=result_zip("feature"), branch="feature",
                                      created_at="2026-09-06T00:00:00Z")
    arts["norun"] = gh.add_artifact(NAME, zip_bytes=result_zip("norun"), with_run=False,
                                    created_at="2026-09-08T00:00:00Z")
    arts["other-name"] = gh.add_artifact("coverage", zip_bytes=result_zip("coverage"),
                                         created_at="2026-09-09T00:00:00Z")
    return arts


def test_baseline_is_newest_valid_main_artifact_across_pages(gh, client):
    arts = _populate(gh)

    found = fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW)

    assert found is not None
    result, meta = found
    assert isinstance(result, RunResult) and result.git_sha == "new"
    assert meta["id"] == arts["new"]["id"]
    lists = gh.find("actions/list-artifacts-for-repo")
    # newest first, two a page: [norun, fork], [feature, expired], [lapsed, new] — page 4 ('old') is never read
    assert [r.query["page"][0] if "page" in r.query else "1" for r in lists] == ["1", "2", "3"]
    assert lists[0].query == {"name": [NAME], "per_page": ["2"]}
    downloads = gh.find("actions/download-artifact")
    assert [r.path for r in downloads] == [f"/repos/acme/shop/actions/artifacts/{arts['new']['id']}/zip"]


def test_the_search_stops_at_the_first_page_holding_a_baseline(gh, client):
    for day in range(1, 10):     # nine usable artifacts: five pages of two
        newest = gh.add_artifact(NAME, zip_bytes=result_zip(f"day{day}"), created_at=f"2026-09-0{day}T00:00:00Z")
    result, meta = fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW)
    assert (result.git_sha, meta["id"]) == ("day9", newest["id"])
    assert len(gh.find("actions/list-artifacts-for-repo")) == 1


def test_a_gone_page_leads_to_the_next_page(gh, client):
    older = gh.add_artifact(NAME, zip_bytes=result_zip("older"), created_at="2026-09-01T00:00:00Z")
    for day in (2, 3):
        gh.add_artifact(NAME, zip_bytes=result_zip("gone"), created_at=f"2026-09-0{day}T00:00:00Z", gone=True)
    result, meta = fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW)
    assert (result.git_sha, meta["id"]) == ("older", older["id"])
    assert len(gh.find("actions/list-artifacts-for-repo")) == 2


def test_past_the_page_cap_the_search_ends_with_a_notice_not_an_error(gh, client):
    gh.max_page_size = 1
    for _ in range(51):
        gh.add_artifact(NAME, zip_bytes=result_zip("fork"), head_repository_id=99999)
    notices: list[str] = []
    assert fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW, on_notice=notices.append) is None
    assert len(gh.find("actions/list-artifacts-for-repo")) == 50
    (notice,) = notices
    assert notice.startswith(f"Stopped looking for a baseline after the newest 50 pages of artifacts named '{NAME}'")
    assert "branch 'main'" in notice


def test_storage_redirect_target_never_receives_the_token(gh, client):
    art = gh.add_artifact(NAME, zip_bytes=result_zip("x"))

    data = client.download_artifact_zip("acme", "shop", art["id"])

    assert data == result_zip("x")
    (api,) = gh.find("actions/download-artifact")
    (storage,) = gh.find(STORAGE_OPERATION)
    assert api.headers["Authorization"] == f"Bearer {TOKEN}"
    assert api.headers["Accept"] == "application/vnd.github+json"
    assert api.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert api.headers["User-Agent"] == "rag-eval-gate"
    assert "Authorization" not in storage.headers
    assert TOKEN not in json.dumps(storage.headers)
    assert storage.status == 200


def test_storage_failure_names_the_download_without_its_signature(gh, client):
    art = gh.add_artifact(NAME, zip_bytes=result_zip("x"))
    gh.fail(STORAGE_OPERATION, 403, message="AuthenticationFailed")
    with pytest.raises(GithubError) as excinfo:
        client.download_artifact_zip("acme", "shop", art["id"])
    assert str(excinfo.value) == (f"Artifact storage GET {gh.origin}/_storage/artifacts/{art['id']}"
                                  " failed with HTTP 403: AuthenticationFailed")
    assert "one minute" in excinfo.value.tip


def test_gone_newest_artifact_falls_back_to_the_next(gh, client):
    older = gh.add_artifact(NAME, zip_bytes=result_zip("older"), created_at="2026-09-01T00:00:00Z")
    gh.add_artifact(NAME, zip_bytes=result_zip("newer"), created_at="2026-09-02T00:00:00Z", gone=True)

    result, meta = fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW)

    assert result.git_sha == "older" and meta["id"] == older["id"]
    assert [r.status for r in gh.find("actions/download-artifact")] == [410, 302]


def test_download_of_gone_artifact_raises_410(gh, client):
    art = gh.add_artifact(NAME, zip_bytes=result_zip("x"), gone=True)
    with pytest.raises(GithubError) as excinfo:
        client.download_artifact_zip("acme", "shop", art["id"])
    assert excinfo.value.status == 410
    assert "Artifact has expired" in str(excinfo.value)


def test_no_usable_artifact_gives_none(gh, client):
    gh.add_artifact(NAME, zip_bytes=result_zip("fork"), head_repository_id=1)
    gh.add_artifact(NAME, zip_bytes=result_zip("gone"), gone=True)
    assert fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW) is None
    assert fetch_baseline(client, "acme", "shop", "never-uploaded", "main", now=NOW) is None


def test_find_baseline_artifact_filters_and_orders():
    def art(i, created, **run):
        wf = {"id": i, "repository_id": 1, "head_repository_id": 1, "head_branch": "main", **run}
        return {"id": i, "expired": False, "created_at": created, "expires_at": None, "workflow_run": wf}

    arts = [
        art(1, None),
        art(2, "2026-09-01T00:00:00Z"),
        art(3, "2026-09-02T00:00:00+00:00"),
        art(4, "2026-09-03T00:00:00Z", head_repository_id=2),  # fork
        art(5, "2026-09-04T00:00:00Z", head_branch="dev"),
        {**art(6, "2026-09-05T00:00:00Z"), "expires_at": "2026-09-09T23:59:59Z"},  # lapsed
        {**art(7, "2026-09-05T00:00:00Z"), "expired": True},
        {**art(8, "2026-09-05T00:00:00Z"), "workflow_run": None},
        {**art(9, "2026-09-02T00:00:00Z"), "expires_at": "2026-09-11T00:00:00Z"},
    ]
    assert [a["id"] for a in find_baseline_artifact(arts, "main", NOW)] == [9, 3, 2, 1]
    with pytest.raises(ValueError, match="timezone-aware"):
        find_baseline_artifact(arts, "main", datetime(2026, 9, 10))


# ---------------------------------------------------------------------- unsafe archives


def _symlink_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo("runresult.json")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc/passwd")
    return buf.getvalue()


def _lying_zip(real: int, declared: int) -> bytes:
    """A member that inflates to ``real`` bytes but declares ``declared`` in the central directory."""
    data = bytearray(make_zip({"runresult.json": b" " * real}))
    at = data.rfind(b"PK\x01\x02")
    struct.pack_into("<I", data, at + 24, declared)
    return bytes(data)


@pytest.mark.parametrize(
    ("zip_bytes", "message"),
    [
        (make_zip({"../evil.json": b"{}"}), r"member '\.\./evil\.json' has a '\.\.' path"),
        (make_zip({"/abs/runresult.json": b"{}"}), r"member '/abs/runresult\.json' has an absolute path"),
        (make_zip({"ok.json": b"{}", "sub/../../x.txt": b""}), r"'sub/\.\./\.\./x\.txt' has a '\.\.' path"),
        (_symlink_zip(), r"member 'runresult\.json' is a symbolic link"),
        (make_zip({"runresult.json": b"[" * 3000}), r"declares 3000 bytes, over the 2048-byte limit"),
        (_lying_zip(real=50_000, declared=100), r"'runresult\.json' is corrupt"),
        (make_zip({"readme.txt": b"hi"}), r"holds no \.json file"),
        (make_zip({"a.json": b"{}", "b.json": b"{}"}), r"several \.json files \['a\.json', 'b\.json'\]"),
        (make_zip({"runresult.json": b"{not json"}), r"member 'runresult\.json': line 1: not valid JSON"),
        (make_zip({"runresult.json": b"[1, 2]"}), r"member 'runresult\.json': not a RunResult"),
        (make_zip({"runresult.json": result_bytes("x").replace(b'{"schema_version"', b'{"git_sha":"evil","schema_version"')}),
         r"member 'runresult\.json': line 1: key 'git_sha' appears twice"),
        (make_zip({"runresult.json": b"[" * 1000 + b"]" * 1000}),
         r"member 'runresult\.json': line 1: nested more than 64 levels deep"),
        (make_zip({"runresult.json": result_bytes("x").replace(b'"repeats":1', b'"repeats":NaN')}),
         r"member 'runresult\.json': line 1: NaN is not a finite number"),
        (b"this is not a zip", r"not a readable zip file"),
    ],
    ids=["dotdot", "absolute", "dotdot-non-json", "symlink", "oversized", "lying-size", "no-json",
         "two-json", "bad-json", "not-object", "key-twice", "deep", "nan", "not-zip"],
)
def test_unsafe_or_broken_artifact_raises_baseline_error(gh, client, zip_bytes, message):
    art = gh.add_artifact(NAME, zip_bytes=zip_bytes)
    with pytest.raises(BaselineError, match=message) as excinfo:
        fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW, max_member_bytes=2048)
    assert str(excinfo.value).startswith(f"Baseline artifact '{NAME}' (id {art['id']})")


def test_safe_extract_counts_inflated_bytes_and_total():
    with pytest.raises(BaselineError, match="inflate past the 1500-byte total limit"):
        safe_extract_json(make_zip({"a.json": b"1" * 1000, "b.json": b"2" * 1000}),
                          max_member_bytes=1200, max_total_bytes=1500)
    # declared size within the cap, real data beyond it: refused (CPython's zipfile stops at the
    # declared size and fails the CRC; the byte count while reading is the second line of defence)
    with pytest.raises(BaselineError, match="corrupt|inflates past"):
        safe_extract_json(_lying_zip(real=5000, declared=1000), max_member_bytes=1200)
    assert safe_extract_json(make_zip({"dir/r.json": b"{}", "notes.txt": b"x" * 10_000}),
                             max_member_bytes=100) == {"dir/r.json": b"{}"}


def test_named_member_is_chosen_among_several(gh, client):
    gh.add_artifact(NAME, zip_bytes=make_zip({"meta.json": b"{}", "out/runresult.json": result_bytes("a")}))
    result, _ = fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW, member="runresult.json")
    assert result.git_sha == "a"


def test_download_over_the_size_cap_is_refused(gh, sleeper):
    art = gh.add_artifact(NAME, zip_bytes=make_zip({"r.json": os.urandom(4000)}))
    small = GitHubClient(TOKEN, api_url=gh.api_url, sleep=sleeper, max_download_bytes=1000)
    with pytest.raises(BaselineError, match=rf"Baseline artifact '{NAME}' \(id {art['id']}\).*1000-byte download cap"):
        fetch_baseline(small, "acme", "shop", NAME, "main", now=NOW)


# ---------------------------------------------------------------------- sticky comment


def test_existing_marker_comment_on_page_two_is_updated_not_duplicated(gh, client):
    marker = MARKER_TEMPLATE.format(key="gate")
    gh.add_comment(7, "LGTM", login="reviewer")
    gh.add_comment(7, f"why does the bot write {marker} here?", login="reviewer")  # quoted: not ours
    ours = gh.add_comment(7, f"{marker}\nold report")
    gh.add_comment(7, "thanks", login="reviewer")

    updated = upsert_comment(client, "acme", "shop", 7, "gate", "new report")

    assert updated["id"] == ours["id"]
    assert [c["body"] for c in gh.comments[7]] == [
        "LGTM", f"why does the bot write {marker} here?", f"{marker}\nnew report", "thanks"]
    assert len(gh.find("issues/list-comments")) == 2  # page 2 was read
    assert not gh.find("issues/create-comment")
    (patch,) = gh.find("issues/update-comment")
    assert patch.path == f"/repos/acme/shop/issues/comments/{ours['id']}"


def test_first_run_creates_one_comment_and_later_runs_update_it(gh, client):
    first = upsert_comment(client, "acme", "shop", 7, "gate", "report 1")
    second = upsert_comment(client, "acme", "shop", 7, "gate", "report 2")
    again = upsert_comment(client, "acme", "shop", 7, "gate", "report 2")

    assert first["id"] == second["id"] == again["id"]
    assert [c["body"] for c in gh.comments[7]] == ["<!-- rag-eval-gate:gate -->\nreport 2"]
    assert len(gh.find("issues/create-comment")) == 1
    assert len(gh.find("issues/update-comment")) == 1  # an unchanged body is not re-sent
    assert upsert_comment(client, "acme", "shop", 7, "verify", "other")["id"] != first["id"]


def test_several_marker_comments_update_the_newest(gh, client):
    gh.add_comment(7, "<!-- rag-eval-gate:gate -->\nrace 1")
    newest = gh.add_comment(7, "<!-- rag-eval-gate:gate -->\nrace 2")
    assert upsert_comment(client, "acme", "shop", 7, "gate", "x")["id"] == newest["id"]
    assert gh.comments[7][0]["body"].endswith("race 1")


def test_comment_over_the_limit_is_refused_before_any_request(gh, client):
    marker_len = len(comment_marker("gate")) + 1
    with pytest.raises(ValueError, match="GitHub's limit is 65536"):
        upsert_comment(client, "acme", "shop", 7, "gate", "x" * (MAX_COMMENT_CHARS - marker_len + 1))
    assert gh.requests == []
    upsert_comment(client, "acme", "shop", 7, "gate", "x" * (MAX_COMMENT_CHARS - marker_len))
    assert len(gh.comments[7][0]["body"]) == MAX_COMMENT_CHARS
    with pytest.raises(ValueError, match="comment key"):
        comment_marker("a-->b")


def test_forbidden_comment_raises_github_error_403(gh, client):
    gh.fail("issues/create-comment", 403, message="Resource not accessible by integration")
    with pytest.raises(GithubError) as excinfo:
        upsert_comment(client, "acme", "shop", 7, "gate", "report")
    err = excinfo.value
    assert err.status == 403 and err.method == "POST" and err.path == "/repos/acme/shop/issues/7/comments"
    assert str(err) == ("GitHub API POST /repos/acme/shop/issues/7/comments failed with HTTP 403:"
                        " Resource not accessible by integration")
    assert "pull-requests: write" in err.tip
    assert len(gh.find("issues/create-comment")) == 1  # a permission error is not retried


# ---------------------------------------------------------------------- retries and rate limits


def test_429_with_retry_after_is_retried_after_that_wait(gh, client, sleeper):
    gh.add_artifact(NAME)
    gh.fail("actions/list-artifacts-for-repo", 429, headers={"Retry-After": "1"})
    assert len(client.list_artifacts("acme", "shop", NAME)) == 1
    assert sleeper.waits == [1.0]
    assert [r.status for r in gh.find("actions/list-artifacts-for-repo")] == [429, 200]


def test_500_three_times_then_success(gh, client, sleeper):
    gh.add_pull(12, head_sha="c" * 40)
    gh.fail("pulls/get", 500, times=3)
    assert client.get_pull("acme", "shop", 12)["head"]["sha"] == "c" * 40
    assert sleeper.waits == [1.0, 2.0, 4.0]


def test_persistent_500_raises_after_max_retries(gh, client, sleeper):
    gh.add_pull(12)
    gh.fail("pulls/get", 500, times=10, message="Server Error")
    with pytest.raises(GithubError) as excinfo:
        client.get_pull("acme", "shop", 12)
    assert excinfo.value.status == 500
    assert str(excinfo.value) == ("GitHub API GET /repos/acme/shop/pulls/12 failed with HTTP 500"
                                  " after 4 attempts: Server Error")
    assert len(gh.find("pulls/get")) == 4 and len(sleeper.waits) == 3


def test_primary_rate_limit_waits_until_reset(gh, client, sleeper):
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(CLOCK) + 5)}
    gh.fail("issues/list-comments", 403, headers=reset, message="API rate limit exceeded")
    assert client.list_issue_comments("acme", "shop", 7) == []
    assert sleeper.waits == [6.0]  # until the reset, plus one second of slack


def test_rate_limit_resetting_too_late_raises_with_the_reset_time(gh, client, sleeper):
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(CLOCK) + 3600)}
    gh.fail("issues/list-comments", 429, headers=reset)
    with pytest.raises(GithubError) as excinfo:
        client.list_issue_comments("acme", "shop", 7)
    err = excinfo.value
    assert err.status == 429 and sleeper.waits == []
    reset_at = datetime.fromtimestamp(CLOCK + 3600, timezone.utc)
    assert err.retry_at == reset_at
    assert f"it resets at {reset_at:%Y-%m-%d %H:%M:%S} UTC" in str(err)
    assert len(gh.find("issues/list-comments")) == 1


def test_connection_errors_are_retried_then_reported(sleeper):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    c = GitHubClient(TOKEN, api_url=f"http://127.0.0.1:{port}", timeout=2, sleep=sleeper)
    with pytest.raises(GithubError, match=r"GET /repos/a/b/pulls/1: no answer after 4 attempts") as excinfo:
        c.get_pull("a", "b", 1)
    assert excinfo.value.status is None and sleeper.waits == [1.0, 2.0, 4.0]


def test_pagination_is_bounded_and_stays_on_the_api_host(gh, client):
    gh.fail("issues/list-comments", 200, body=[],
            headers={"Link": '<http://203.0.113.9/repos/acme/shop/issues/7/comments?page=2>; rel="next"'})
    with pytest.raises(GithubError, match="points to another host"):
        client.list_issue_comments("acme", "shop", 7)

    gh.max_page_size = 1
    for i in range(51):
        gh.add_comment(8, f"c{i}")
    with pytest.raises(GithubError, match="more than 50 pages"):
        client.list_issue_comments("acme", "shop", 8)
    assert len(gh.find("issues/list-comments")) == 1 + 50


# ---------------------------------------------------------------------- other operations


def test_commit_status_description_is_cut_to_140_characters(gh, client):
    status = client.create_commit_status("acme", "shop", "d" * 40, "failure", "rag-eval-gate",
                                         "mrr@5 fell " + "0.90→0.63 " * 30)
    (req,) = gh.find("repos/create-commit-status")
    assert len(req.json["description"]) == 140 and req.json["description"].endswith("…")
    assert "target_url" not in req.json
    assert status["state"] == "failure" and status["context"] == "rag-eval-gate"
    client.create_commit_status("acme", "shop", "d" * 40, "success", "ctx", "ok",
                                target_url="https://example.com/run/1")
    assert gh.find("repos/create-commit-status")[1].json == {
        "state": "success", "context": "ctx", "description": "ok", "target_url": "https://example.com/run/1"}
    with pytest.raises(ValueError, match="state must be one of"):
        client.create_commit_status("acme", "shop", "d" * 40, "failed", "ctx", "")


def test_get_pull_and_unknown_pull(gh, client):
    gh.add_pull(3, head_ref="chunk-800", head_sha="e" * 40)
    pull = client.get_pull("acme", "shop", 3)
    assert (pull["head"]["ref"], pull["base"]["ref"], pull["number"]) == ("chunk-800", "main", 3)
    with pytest.raises(GithubError) as excinfo:
        client.get_pull("acme", "shop", 4)
    assert excinfo.value.status == 404 and "Check the owner" in excinfo.value.tip


def test_no_token_sends_no_authorization_header(gh, sleeper):
    gh.token = None
    gh.add_pull(3)
    GitHubClient(None, api_url=gh.api_url, sleep=sleeper).get_pull("acme", "shop", 3)
    assert "Authorization" not in gh.requests[-1].headers


# ---------------------------------------------------------------------- the token stays secret


def test_token_never_appears_in_errors_reprs_or_logs(gh, client, sleeper, caplog):
    caplog.set_level(logging.DEBUG)
    texts = [repr(client)]
    art = gh.add_artifact(NAME, zip_bytes=make_zip({"../evil.json": b"{}"}))
    gh.fail("issues/create-comment", 403, message=f"token {TOKEN} may not write here")  # echoed back
    gh.fail("pulls/get", 502, times=4)
    gh.fail("issues/list-comments", 429, headers={"Retry-After": "3600"})
    wrong = GitHubClient("ghp_WRONG", api_url=gh.api_url, sleep=sleeper)
    calls = [
        lambda: client.create_issue_comment("acme", "shop", 7, "x"),
        lambda: client.get_pull("acme", "shop", 1),
        lambda: client.list_issue_comments("acme", "shop", 7),
        lambda: fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW),
        lambda: client.update_issue_comment("acme", "shop", 424242, "x"),
        lambda: wrong.get_pull("acme", "shop", 1),
        lambda: GitHubClient(TOKEN, api_url="http://127.0.0.1:9", timeout=1, max_retries=0).get_pull("a", "b", 1),
    ]
    for call in calls:
        with pytest.raises((GithubError, BaselineError)) as excinfo:
            call()
        texts.append(raises_text(excinfo))
    assert "<redacted>" in texts[1]
    assert f"(id {art['id']})" in texts[4]
    assert "Bad credentials" in texts[6]
    texts += [r.getMessage() for r in caplog.records]
    for text in texts:
        assert TOKEN not in text


# ---------------------------------------------------------------------- the REST description


@needs_spec
def test_every_operation_of_the_subset_round_trips_against_the_description(gh, client):
    art = gh.add_artifact(NAME, zip_bytes=result_zip("x"))
    gh.add_pull(5)
    upsert_comment(client, "acme", "shop", 5, "gate", "one")
    upsert_comment(client, "acme", "shop", 5, "gate", "two")
    client.create_commit_status("acme", "shop", "a" * 40, "pending", "rag-eval-gate", "running",
                                target_url="https://example.com/run")
    client.get_pull("acme", "shop", 5)
    assert client.get_repo("acme", "shop")["default_branch"] == "main"
    fetch_baseline(client, "acme", "shop", NAME, "main", now=NOW)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    run_id = art["workflow_run"]["id"]
    for path in (f"/repos/acme/shop/actions/runs/{run_id}/artifacts?per_page=1",
                 "/repos/acme/shop/actions/workflows/1/runs?branch=main&per_page=1"):
        assert session.get(gh.api_url + path, timeout=5).status_code == 200
    gh.add_artifact(NAME, zip_bytes=b"", gone=True)
    with pytest.raises(GithubError):
        client.download_artifact_zip("acme", "shop", gh.artifacts[-1]["id"])

    assert check_contract(SPEC, gh.requests) == {
        o["operationId"] for item in SPEC["paths"].values() for o in item.values() if isinstance(o, dict)}


@needs_spec
def test_contract_checker_catches_a_bad_request_body():
    bad = LoggedRequest("POST", "/repos/a/b/issues/1/comments", {}, {}, {"text": "no body key"},
                        "issues/create-comment", 201, None)
    with pytest.raises(AssertionError, match="'body' is a required property"):
        check_contract(SPEC, [bad])
    with pytest.raises(AssertionError, match="not an operation of the REST subset"):
        operation_for(SPEC, "DELETE", "/repos/a/b/issues/comments/1")
