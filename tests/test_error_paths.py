"""Every command on a damaged registry: one ``error:`` line naming what is damaged, exit 4, never a traceback.

Issue 45: ``kictl review`` printed a 100-line traceback and exit 1 ("lints found") on a corrupt git object,
where the readers said one line and exit 4.  Each command that takes ``--registry`` (read from the app, so a
command added later is held to the same rule) is driven here against a real git registry whose HEAD commit
object was overwritten, whose merge base was, whose record blob on a PR branch was, one that is missing,
and, for the commands that write, one mounted read-only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kictl import canon
from kictl.errors import EXIT_REGISTRY
from kictl.scaffold import create_registry
from tests import factories
from tests.conftest import RunCli
from tests.test_exit_codes import COMMANDS, REQUIRED

#: The commands that take ``--registry``.
REGISTRY_COMMANDS = sorted(
    name for name, command in COMMANDS.items() if any(p.name == "registry" for p in command.params)
)


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry in git: main holds a chain of records (two commits), branch ``pr`` adds a run beside it."""
    root = tmp_path_factory.mktemp("damaged") / "registry"
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("GIT_AUTHOR", "GIT_COMMITTER"):
            patch.setenv(f"{variable}_NAME", "Test Author")
            patch.setenv(f"{variable}_EMAIL", "author@example.org")
        _build(root)
    return root


def _build(root: Path) -> None:
    from kictl.records import record_from_value
    from kictl.store.registry import Registry

    create_registry(root)
    registry = Registry(root)
    chain = factories.chain()
    registry.add([record_from_value(chain[kind]) for kind in ("definition", "workload", "implementation")])
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "definition")
    registry.add([record_from_value(chain[kind]) for kind in ("protocol", "environment", "run")])
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a run")
    _git(root, "checkout", "-qb", "pr")
    spec = chain["run"]["spec"]
    faster = factories.run(
        definition_digest=spec["definitionDigest"],
        workload_digest=spec["workloadDigest"],
        implementation_digest=spec["implementationDigest"],
        protocol_digest=spec["protocolDigest"],
        environment_digest=spec["environmentDigest"],
        median_ns=9_000,
    )
    registry.add([record_from_value(faster)])
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a faster run")
    _git(root, "checkout", "-q", "main")
    (root / "NOTES").write_text("main moves on\n")
    _git(root, "add", "NOTES")
    _git(root, "commit", "-qm", "notes")


@pytest.fixture
def registry_copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "registry"
    shutil.copytree(pristine, target, symlinks=True)
    return target


def _corrupt(root: Path, sha: str) -> str:
    """Overwrite the loose object ``sha``; its path relative to the repository."""
    relative = f".git/objects/{sha[:2]}/{sha[2:]}"
    path = root / relative
    path.chmod(0o644)
    path.write_bytes(b"not a zlib stream")
    return relative


def _run_digest() -> str:
    return canon.record_digest(factories.chain()["run"])


def _args(name: str, tmp_path: Path) -> list[str]:
    """``REQUIRED``'s arguments with the fixture's records and scratch paths; a real key where one is needed."""
    words = []
    for word in REQUIRED.get(name, []):
        if word == "gemm_tiny" and name in ("show", "verify", "sign", "history", "cite", "rerun", "attest request"):
            words.append(_run_digest())
        elif word.startswith("KEY"):
            words.append(str(tmp_path / "keys" / word))
        elif word.isupper():
            words.append(str(tmp_path / "scratch" / name.replace(" ", "-") / word))
        else:
            words.append(word)
    return [*name.split(), *words]


@pytest.fixture
def keys(tmp_path: Path, cli: RunCli) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir()
    result = cli("keygen", "--out", folder / "KEY")
    assert result.exit_code == 0, result.output
    return folder


def _assert_one_line_exit_4(name: str, result: object, *must: str) -> None:
    code, stderr = result.exit_code, result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in result.output, (name, result.output)  # type: ignore[attr-defined]
    assert code == EXIT_REGISTRY, (name, code, result.output)  # type: ignore[attr-defined]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, (name, stderr)
    for text in must:
        assert text in errors[0], (name, text, errors[0])


#: What each command needs of git with a corrupt HEAD commit. Those that rank, date or compare records read the
#: history (who added a record when, the state at a commit) and must stop with exit 4; the others read files
#: of the working tree or a key and may work, or stop for a reason of their own (a scratch argument, no
#: trust root), in one line.
MUST_READ_GIT = {"leaderboard", "history", "cite", "review", "diff", "site build", "export flashinfer-trace"}


@pytest.mark.slow  # every command in turn: 10-15 s
def test_a_corrupt_head_commit_is_one_line_for_every_command(
    cli: RunCli, registry_copy: Path, keys: Path, tmp_path: Path
) -> None:
    relative = _corrupt(registry_copy, _git(registry_copy, "rev-parse", "HEAD"))
    outcomes = {}
    for name in REGISTRY_COMMANDS:
        result = cli(*_args(name, tmp_path), "--registry", registry_copy)
        outcomes[name] = (result.exit_code, result.stderr.strip().splitlines()[-1:])
        assert "Traceback" not in result.output, (name, result.output)
        if name in MUST_READ_GIT:
            _assert_one_line_exit_4(name, result, "is corrupt", relative, "git fsck")
        elif result.exit_code == EXIT_REGISTRY and "is corrupt" in result.stderr:
            _assert_one_line_exit_4(name, result, relative, "git fsck")
        elif result.exit_code != 0:
            assert result.exit_code != 1 or name == "trust verify", (name, result.output)
            assert len([line for line in result.stderr.splitlines() if line.startswith("error:")]) == 1, name
    assert {name for name, (code, _) in outcomes.items() if code == EXIT_REGISTRY} >= MUST_READ_GIT, outcomes


@pytest.mark.parametrize(
    "args",
    [["review", "--base", "main", "--head", "pr"], ["diff", "main", "pr"], ["review", "--base", "main~1"]],
    ids=lambda args: " ".join(args),
)
def test_a_corrupt_merge_base_is_one_line_exit_4(cli: RunCli, registry_copy: Path, args: list[str]) -> None:
    """The issue's case: both tips read, the commit they share does not (``merge_base`` raised GitCommandError)."""
    relative = _corrupt(registry_copy, _git(registry_copy, "rev-parse", "main~1"))
    result = cli(*args, "--registry", registry_copy)
    _assert_one_line_exit_4(" ".join(args), result, "is corrupt", relative, "git fsck")


def test_a_corrupt_record_blob_on_the_pr_is_exit_4_naming_its_file(cli: RunCli, registry_copy: Path) -> None:
    """Not "not a regular file (a submodule?)" and exit 1: the record's file and the object git cannot read."""
    added = _git(registry_copy, "diff", "--name-only", "main...pr").split()
    (path,) = [path for path in added if "/BenchmarkRun/" in path]
    relative = _corrupt(registry_copy, _git(registry_copy, "rev-parse", f"pr:{path}"))
    result = cli("review", "--base", "main", "--head", "pr", "--registry", registry_copy)
    _assert_one_line_exit_4("review", result, "is corrupt", path, relative.rsplit("/", 1)[-1][:10])


def test_a_broken_ref_is_damage_not_an_unknown_revision(cli: RunCli, registry_copy: Path) -> None:
    """A branch whose ref file git cannot read is named as such (``diff`` called it "not a git revision")."""
    (registry_copy / ".git" / "refs" / "heads" / "pr").write_text("not a commit id\n")
    for args in (["diff", "main", "pr"], ["review", "--base", "main", "--head", "pr"]):
        result = cli(*args, "--registry", registry_copy)
        _assert_one_line_exit_4(args[0], result, "refs/heads/pr", "git fsck")


@pytest.mark.slow  # every command in turn: 10-15 s
def test_a_missing_registry_is_one_line_exit_4_for_every_command(cli: RunCli, keys: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "no-such-folder"
    for name in REGISTRY_COMMANDS:
        result = cli(*_args(name, tmp_path), "--registry", nowhere)
        _assert_one_line_exit_4(name, result, str(nowhere))


#: One process runs every writer on a read-only registry (``[[args...], ...]`` on argv), as tests/trust does.
_RUN_ALL = """
import json, sys
from typer.testing import CliRunner
from kictl.cli import make_app
app, codes = make_app(), []
for args in json.loads(sys.argv[1]):
    result = CliRunner().invoke(app, args)
    codes.append([result.exit_code, result.output[-2000:], result.stderr])
print(json.dumps(codes))
"""


def test_writers_on_a_read_only_registry_are_one_line_exit_4(keys: Path, registry_copy: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0 and shutil.which("unshare") is None:
        pytest.skip("root without unshare cannot make a read-only registry")
    manifest = tmp_path / "more.json"
    other = factories.protocol(family="another-family")
    manifest.write_text(json.dumps(other))
    commands = [
        ["add", str(manifest)],
        ["sign", _run_digest(), "--key", str(keys / "KEY")],
        ["bench", "gemm_tiny", "--impl", str(tmp_path / "impl.py"), "--device", "cpu"],  # refused before it runs
        ["init", str(registry_copy / "inner")],
        ["keygen", "--out", str(registry_copy / "new.key")],
    ]
    argv = json.dumps([[*args, "--registry", str(registry_copy)] if args[0] not in ("keygen", "init") else args
                       for args in commands])  # fmt: skip
    command = [sys.executable, "-c", _RUN_ALL, argv]
    if os.geteuid() != 0:
        for folder, _dirs, files in os.walk(registry_copy):
            for file in files:
                os.chmod(os.path.join(folder, file), 0o444)
            os.chmod(folder, 0o555)
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False)
        finally:
            for folder, _dirs, _files in os.walk(registry_copy):
                os.chmod(folder, 0o755)
    else:
        script = f'mount --bind -o ro "{registry_copy}" "{registry_copy}" && exec "$@"'
        done = subprocess.run(["unshare", "--mount", "sh", "-c", script, "sh", *command], capture_output=True,
                              text=True, check=False)  # fmt: skip
        if done.returncode != 0 and "mount" in done.stderr:
            pytest.skip(f"no read-only mount here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    for args, (code, output, stderr) in zip(commands, json.loads(done.stdout), strict=True):
        assert "Traceback" not in output, (args, output)
        assert code == EXIT_REGISTRY, (args, code, output)
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (args, stderr)
        assert str(registry_copy) in errors[0], (args, errors[0])
        assert "read-only" in errors[0].lower() or "permission" in errors[0].lower(), (args, errors[0])


def test_a_tampered_registry_blob_is_named_by_its_file(cli: RunCli, tmp_path: Path) -> None:
    """A blob under registry/blobs/ whose bytes no longer hash to its name: each reader names that file."""
    from kictl import blobs
    from kictl.records import record_from_value
    from kictl.store.registry import Registry

    root = tmp_path / "registry"
    create_registry(root)
    registry = Registry(root)
    chain = factories.chain()
    data = blobs.write_safetensors({"A": ("float16", (2, 8), bytes(32))})
    digest = registry.add_blob(data)
    chain["workload"]["spec"]["inputs"]["A"] = {"type": "blob", "digest": digest, "key": "A"}
    workload_digest = canon.record_digest(chain["workload"])
    chain["run"]["spec"]["workloadDigest"] = workload_digest
    registry.add([record_from_value(value) for value in chain.values()])
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a workload with a blob input")
    relative = f"registry/blobs/{digest[7:9]}/{digest[7:]}"
    (root / relative).write_bytes(data[:-1] + b"\x01")  # same name, other bytes
    run = canon.record_digest(chain["run"])
    for args, code in ((["validate"], 3), (["verify", run], 1)):
        result = cli(*args, "--registry", root)
        assert "Traceback" not in result.output, (args, result.output)
        assert result.exit_code == code, (args, result.output)
        assert relative[:30] in result.output, (args, result.output)  # verify cuts the digest to 12 digits
    implementation = canon.record_digest(chain["implementation"])
    bench = cli("bench", "gemm_tiny", "--impl", implementation, "--device", "cpu", "--no-sandbox", "--registry", root)
    assert "Traceback" not in bench.output
    assert bench.exit_code == 3, bench.output
    assert relative in bench.stderr, bench.stderr
