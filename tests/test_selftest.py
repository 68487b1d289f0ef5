"""``kictl selftest`` and the exploit corpus (issue 28): the manifest lists every entry, an installed kictl finds
it, a harness with one check broken fails naming the entry, and ``kictl attest rerun``'s gate reads the result.

The whole CPU corpus runs once, in tests/bench/test_cheats.py's session, which the selftest's judge re-reads
(``test_the_selftest_judges_every_cpu_entry_caught`` there); here one small real session runs against a scratch
harness whose ``outputsNotAliasInputs`` check is switched off in this process only (monkeypatch: no switch in the
product an attacker could flip).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from kictl import selftest
from kictl.bench.judge import verdict
from kictl.bench.judge.results import harness_identity
from kictl.errors import CheckFailed, RecordError
from kictl.store.registry import Registry
from tests.bench.conftest import SANDBOX
from tests.conftest import ASSETS, RunCli, copy_bundled

CHEATS = ASSETS / "cheats"


def test_the_manifest_lists_every_file_of_the_corpus() -> None:
    loaded = selftest.load_corpus()
    assert loaded.folder == CHEATS  # a source checkout reads the folder itself
    files = {path.stem for path in CHEATS.glob("*.py")}
    assert set(loaded.corpus.entries) == files, "list every new file in tests/assets/cheats/corpus.json"
    for name, entry in loaded.corpus.entries.items():
        devices = {loaded.corpus.sessions[session].device for session in entry.expect}
        assert devices <= {"cpu", "cuda"}, name


def test_a_wheel_ships_the_corpus_as_package_data() -> None:
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    mapping = config["tool"]["hatch"]["build"]["targets"]["wheel"]["force-include"]
    assert mapping == {"tests/assets/cheats": "kictl/_corpus"}
    assert (Path(selftest.__file__).parent / "_corpus").name == "_corpus"  # where corpus_folder() looks first


def test_a_malformed_manifest_is_refused(tmp_path: Path) -> None:
    entries = {"x": {"class": "c", "expect": {"s": {"status": "passed"}}}}
    manifest = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "ExploitCorpus", "sessions": {}, "entries": entries}
    (tmp_path / "corpus.json").write_text(json.dumps(manifest))
    with pytest.raises(RecordError, match=r"entry x has no file x\.py"):
        selftest.load_corpus(tmp_path)
    (tmp_path / "x.py").write_text("def run(x):\n    return x\n")
    with pytest.raises(RecordError, match="unknown session 's'"):
        selftest.load_corpus(tmp_path)


@pytest.mark.parametrize(
    ("expectation", "status", "detail", "caught"),
    [
        ({"status": "reward_hack", "checks": ["outputsFresh"]}, "reward_hack", "outputsFresh: same answer", True),
        ({"status": "reward_hack", "checks": ["outputsFresh"]}, "reward_hack", "aboveFloor: 3 ns; x: y", False),
        ({"status": "reward_hack", "checks": ["a", "b"]}, "reward_hack", "c: no; b: yes", True),
        ({"status": "reward_hack", "checks": ["outputsFresh"]}, "passed", "", False),
        ({"status": "timeout", "detail": "no answer"}, "timeout", "no answer within 10 s", True),
        ({"status": "timeout", "detail": "no answer"}, "runtime_error", "no answer", False),
        ({"status": "passed"}, "passed", "", True),
        ({"status": "passed"}, "reward_hack", "outputsFresh: flagged honest code", False),
    ],
)
def test_judge(expectation: dict[str, Any], status: str, detail: str, caught: bool) -> None:
    assert selftest.judge(selftest.Expectation.model_validate_json(json.dumps(expectation)), status, detail) is caught


def _record(devices: list[str], *, ok: bool = True, **harness: str) -> dict[str, Any]:
    identity = {**harness_identity(), **harness}
    return {"harness": identity, "ok": ok, "missed": [] if ok else ["x"], "sandboxed": True, "devices": devices}


def _protocol(device: str = "cpu", **harness: str) -> dict[str, Any]:
    return {"harness": {**harness_identity(), **harness}, "measurement": {"timer": "perf_counter_ns", "device": device}}


def test_attest_requires_a_passing_selftest_of_the_same_harness_and_device(tmp_path: Path) -> None:
    registry = Registry(tmp_path)  # no advisories: only the selftest decides
    home = Path(os.environ["KICTL_CONFIG_HOME"])
    folder = tmp_path / "results"
    folder.mkdir()
    (home / "selftest.json").unlink()
    with pytest.raises(CheckFailed, match="no passing selftest of the rerun's harness kictl"):
        selftest.require_sound_harness(registry, folder, [_protocol()])
    for records, device, passes in [
        ([_record(["cpu"])], "cpu", True),
        ([_record(["cpu"])], "cuda:0", False),  # a CPU selftest says nothing of the GPU path
        ([_record(["cpu"], ok=False)], "cpu", False),
        ([_record(["cpu"], commit="0" * 40)], "cpu", False),  # another build
        ([_record(["cpu"], version="0.0.9")], "cpu", False),
    ]:
        (folder / "selftest.json").write_text(json.dumps({"results": records}))
        if passes:
            selftest.require_sound_harness(registry, folder, [_protocol(device)])
        else:
            with pytest.raises(CheckFailed):
                selftest.require_sound_harness(registry, folder, [_protocol(device)])


@pytest.mark.skipif(not SANDBOX, reason="needs bubblewrap (apt-get install bubblewrap)")
def test_a_harness_with_one_check_broken_fails_its_selftest_naming_the_entry(
    cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = copy_bundled(tmp_path / "bundled")
    real = verdict.integrity_checks

    def without_alias_check(*args: Any, **kwargs: Any) -> dict[str, dict[str, str]]:
        checks = real(*args, **kwargs)
        checks["outputsNotAliasInputs"] = {"result": "passed"}  # the scratch harness's broken check
        return checks

    monkeypatch.setattr(verdict, "integrity_checks", without_alias_check)
    entries = ("rmsnorm_returns_input", "rmsnorm_mutates_inputs", "honest_reused_buffer")
    out = tmp_path / "results"
    args = [arg for name in entries for arg in ("--entry", name)]
    result = cli("selftest", "--device", "cpu", *args, "--registry", registry.root, "--out", out, "--json")
    assert result.exit_code == 1, result.output
    assert result.stderr.rstrip().endswith("error: 1 corpus entry missed: rmsnorm_returns_input"), result.stderr
    # issue 45: a line per step (a log is no terminal), the session's bench steps under it, and what is left
    steps = [line for line in result.stderr.splitlines() if line.startswith("t=")]
    assert re.fullmatch(
        r"t=\d+\.\ds 0/1 sessions done; now rmsnorm-cpu: 3 entries on cpu \(0 of 1, time left unknown yet\)", steps[0]
    ), steps
    assert any(re.match(r"t=\S+ rmsnorm-cpu: b\d+: done \(", line) for line in steps), steps
    assert steps[-1].endswith(" 1/1 sessions done (1 of 1, last step)"), steps
    report = json.loads(result.stdout)
    verdicts = {item["entry"]: item["caught"] for item in report["entries"]}
    assert verdicts == {"rmsnorm_returns_input": False, "rmsnorm_mutates_inputs": True, "honest_reused_buffer": True}
    assert (report["ok"], report["missed"], report["harness"]) == (False, ["rmsnorm_returns_input"], harness_identity())
    # the failed selftest is what attest reads: this harness may not sign CPU reruns
    home = Path(os.environ["KICTL_CONFIG_HOME"])
    kept = json.loads((home / "selftest.json").read_text())["results"]
    mine = [item for item in kept if item["harness"] == harness_identity()]
    assert sorted((item["devices"], item["ok"]) for item in mine) == [(["cpu"], False), (["cuda"], True)]
    with pytest.raises(CheckFailed, match="no passing selftest"):
        selftest.require_sound_harness(registry, out, [_protocol("cpu")])
