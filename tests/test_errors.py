"""KictlError carries where it happened as data (path, pointer), not as text to cut out again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kictl import canon
from kictl.errors import NotFoundError, RecordError
from kictl.records import load_record_file
from kictl.store.registry import Registry
from kictl.validate import check_record_file
from tests import factories
from tests.conftest import RunCli


def test_the_text_is_path_pointer_message() -> None:
    error = RecordError("unknown kind 'X'", path="a/b.json", pointer="$.kind", details=["a/b.json: $.spec: more"])
    assert (error.path, error.pointer, error.reason) == ("a/b.json", "$.kind", "unknown kind 'X'")
    assert error.message == "a/b.json: $.kind: unknown kind 'X'"
    assert error.diagnostics() == "a/b.json: $.kind: unknown kind 'X'\na/b.json: $.spec: more"
    assert error.at("a/b.json") == "$.kind: unknown kind 'X'"
    assert error.at("elsewhere.json") == error.message
    assert error.details_at("a/b.json") == ["$.spec: more"]
    assert RecordError("plain").message == "plain"
    assert NotFoundError("no such", path="x", candidates=["a"]).diagnostics() == "x: no such\ncandidates: a"


def test_a_schema_error_knows_its_file_and_json_path(tmp_path: Path) -> None:
    record = factories.definition()
    record["spec"]["axes"]["M"] = {"type": "var", "extra": 1}
    data = json.dumps(record).encode()
    with pytest.raises(RecordError) as caught:
        load_record_file(data, source="registry/records/Definition/ab/x.json")
    assert caught.value.path == "registry/records/Definition/ab/x.json"
    assert caught.value.pointer == "$.spec.axes.M.extra"
    _, problems = check_record_file("registry/records/Definition/ab/x.json", data)
    assert any(problem.message.startswith("$.spec.axes.M.extra: ") for problem in problems), problems


def test_an_io_or_git_error_that_escapes_a_command_is_one_line_exit_4(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``guarded``'s last line of defence (issue 45): never a traceback and exit 1 for a disk or git failure."""
    import git
    import typer

    from kictl.cli._common import guarded
    from kictl.cli._state import STATE
    from kictl.errors import EXIT_REGISTRY

    # --debug re-raises; the flag lives in the process, and an earlier in-process `kictl --debug` may have set it
    monkeypatch.setattr(STATE, "debug", False)

    failures: list[BaseException] = [
        PermissionError(13, "Permission denied", "/srv/reg/registry/records/x.json"),
        git.GitCommandError(
            ["git", "merge-base", "a", "b"], 128, b"fatal: loose object 3f02 (stored in .git/objects/3f/02) is corrupt"
        ),
    ]
    expected = [
        "error: /srv/reg/registry/records/x.json: Permission denied; check the path and its permissions",
        "error: the git store of the registry is corrupt (git merge-base: loose object 3f02 (stored in "
        ".git/objects/3f/02) is corrupt); `git fsck` says more",
    ]
    for failure, start in zip(failures, expected, strict=True):

        def command(failure: BaseException = failure) -> None:
            raise failure

        with pytest.raises(typer.Exit) as caught:
            guarded(command)()
        assert caught.value.exit_code == EXIT_REGISTRY
        stderr = capsys.readouterr().err
        assert stderr.startswith(start), stderr
        assert stderr.count("\n") == 1, stderr

    def a_bug() -> None:
        raise ValueError("a bug keeps its traceback")

    with pytest.raises(ValueError, match="a bug"):
        guarded(a_bug)()


def test_a_short_digest_prefix_is_said_once_with_what_to_give(cli: RunCli, empty_registry: Registry) -> None:
    """Issue 45: ``verify 3b1a`` said "give 8+ hex digits" twice; now once, with a digest that starts so."""
    chain = factories.chain()
    file = empty_registry.root.parent / "chain.json"
    file.write_text(json.dumps(chain))
    assert cli("add", file, "--registry", empty_registry.root).exit_code == 0
    digest = canon.record_digest(chain["run"])
    result = cli("verify", digest[7:11], "--registry", empty_registry.root)
    assert result.exit_code == 3, result.output
    first, second = result.stderr.splitlines()
    assert first == f"error: {digest[7:11]}: a digest prefix needs at least 8 hex digits (4 given)"
    assert second.startswith(f"1 digest(s) start with {digest[7:11]}, e.g. {digest[:19]}…: give 8 or more")
    assert result.stderr.count("needs at least 8 hex digits") == 1
