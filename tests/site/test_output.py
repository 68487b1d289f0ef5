"""``kictl site build OUT`` writes only its own files, only inside OUT, never through a link (issue 41).

Each attack is an unpacked pull-request artifact: a folder the pull request's own code built, holding what its
author chose.  Outside it sits a victim file; every test checks that the victim is intact after the build,
whatever the build did.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kictl.errors import RegistryError
from kictl.index import secret
from kictl.records import record_from_value
from kictl.scaffold import create_registry
from kictl.site.output import SEAL_PURPOSE, STATE_FILE, SiteFolder, site_parts
from kictl.store.registry import Registry
from tests.conftest import RunCli
from tests.trust.conftest import build_records

VICTIM_TEXT = "the maintainer's file\n"


@pytest.fixture(scope="module")
def small_registry(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry of one definition, workload, implementation and run: a build takes well under a second."""
    root = tmp_path_factory.mktemp("small") / "registry"
    create_registry(root)
    Registry(root).add(build_records().all())
    return root


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def build(cli: RunCli, registry: Path, out: Path, *options: str) -> tuple[int, str]:
    result = cli("site", "build", out, "--registry", registry, *options)
    return result.exit_code, result.stderr


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, stderr
    return lines[0]


def forged_manifest(*names: str) -> bytes:
    """A ``build-inputs.json`` of the current format whose one page lists ``names``."""
    state = {"format": 2, "kictl": "0", "pages": {"index.html": {"fingerprint": "0" * 64, "files": list(names)}}}
    return json.dumps(state).encode("utf-8")


def seal_as_kictl(out: Path, manifest: bytes) -> None:
    """What a build on this machine leaves: ``manifest`` in OUT and its seal in kictl's cache (the test holds the
    machine's secret, as a bug in kictl would: the rules on paths must hold even then)."""
    (out / STATE_FILE).write_bytes(manifest)
    mark = secret.seal(SEAL_PURPOSE, os.fsencode(out.resolve()), manifest)
    assert mark is not None
    from kictl.site.output import _record_path, _write_record

    _write_record(_record_path(out.resolve()), mark)


# --------------------------------------------------------------------------- an artifact is not kictl's folder


def test_an_artifact_listing_paths_outside_out_is_refused_and_force_removes_nothing(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    elsewhere = tmp_path / "elsewhere" / "absolute.txt"
    elsewhere.parent.mkdir()
    elsewhere.write_text(VICTIM_TEXT)
    artifact = tmp_path / "artifact" / "_site"
    artifact.mkdir(parents=True)
    (artifact / STATE_FILE).write_bytes(forged_manifest("../../victim.txt", str(elsewhere), "index.html"))
    (artifact / "index.html").write_text("the pull request's page")
    (artifact / "notes.txt").write_text("the pull request's file")

    code, stderr = build(cli, small_registry, artifact)
    assert code == 2, stderr
    assert "is not a site that kictl built there" in one_error_line(stderr)
    assert "--force" in stderr
    assert (artifact / "index.html").read_text() == "the pull request's page"  # nothing written

    code, stderr = build(cli, small_registry, artifact, "--force")
    assert code == 0, stderr
    assert victim.read_text() == VICTIM_TEXT
    assert elsewhere.read_text() == VICTIM_TEXT
    assert (artifact / "notes.txt").read_text() == "the pull request's file"  # --force removes nothing
    assert "<h1" in (artifact / "index.html").read_text()  # its own page replaced the artifact's
    # from now on the folder is kictl's: a rebuild needs no --force
    code, stderr = build(cli, small_registry, artifact, "--incremental")
    assert code == 0, stderr


def test_a_manifest_copied_from_a_real_build_does_not_make_another_folder_kictls(
    cli: RunCli, small_registry: Path, tmp_path: Path
) -> None:
    mine = tmp_path / "mine"
    assert build(cli, small_registry, mine)[0] == 0
    copy = tmp_path / "copy"
    shutil.copytree(mine, copy)  # the same manifest, byte for byte, in another folder: a replay
    (copy / "planted.html").write_text("x")
    code, stderr = build(cli, small_registry, copy)
    assert code == 2, stderr
    one_error_line(stderr)
    # and an edit of the real folder's manifest makes it a folder kictl did not write
    (mine / STATE_FILE).write_bytes(forged_manifest("index.html"))
    code, stderr = build(cli, small_registry, mine)
    assert code == 2, stderr


def test_a_new_or_empty_folder_is_kictls(cli: RunCli, small_registry: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert build(cli, small_registry, empty)[0] == 0
    assert build(cli, small_registry, tmp_path / "new" / "deeper")[0] == 0
    assert build(cli, small_registry, empty, "--incremental")[0] == 0


def test_out_that_is_a_link_is_refused(cli: RunCli, small_registry: Path, tmp_path: Path) -> None:
    target = tmp_path / "home"
    target.mkdir()
    link = tmp_path / "_site"
    link.symlink_to(target, target_is_directory=True)
    code, stderr = build(cli, small_registry, link, "--force")
    assert code == 2, stderr
    assert "is a symbolic link" in one_error_line(stderr)
    assert list(target.iterdir()) == []


# --------------------------------------------------------------------------- never through a link


def test_a_linked_subfolder_is_never_written_through(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    outside = tmp_path / "outside"
    (outside / "scale_h8").mkdir(parents=True)
    page = outside / "scale_h8" / "index.html"
    page.write_text(VICTIM_TEXT)
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "d").symlink_to(outside, target_is_directory=True)  # d/scale_h8/index.html is a page kictl writes

    code, stderr = build(cli, small_registry, artifact)
    assert code == 2, stderr
    code, stderr = build(cli, small_registry, artifact, "--force")
    assert code == 4, stderr
    assert f"{artifact / 'd'} is a symbolic link" in one_error_line(stderr)
    assert page.read_text() == VICTIM_TEXT
    assert sorted(p.name for p in outside.rglob("*")) == ["index.html", "scale_h8"]  # nothing added there


def test_a_linked_page_is_never_written_through_or_replaced(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "index.html").symlink_to(victim)
    code, stderr = build(cli, small_registry, artifact, "--force")
    assert code == 4, stderr
    assert "index.html is a symbolic link" in one_error_line(stderr)
    assert victim.read_text() == VICTIM_TEXT
    assert (artifact / "index.html").is_symlink()


def test_a_linked_page_in_kictls_own_folder_is_not_kept_as_rendered(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    """An incremental build skips pages whose files are there; a link there is not "there"."""
    out = tmp_path / "out"
    assert build(cli, small_registry, out)[0] == 0
    (out / "style.css").unlink()
    (out / "style.css").symlink_to(victim)
    code, stderr = build(cli, small_registry, out, "--incremental")
    assert code == 4, stderr
    assert "style.css is a symbolic link" in one_error_line(stderr)
    assert victim.read_text() == VICTIM_TEXT


# --------------------------------------------------------------------------- a sealed manifest is still checked


def test_a_sealed_manifest_that_escapes_out_is_an_error_before_anything_is_written(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "sub" / "out"
    out.mkdir(parents=True)
    (out / "keep.txt").write_text("x")
    for escaping in ("../../victim.txt", str(victim), "d/../../../victim.txt", "./index.html", "a//b"):
        seal_as_kictl(out, forged_manifest("index.html", escaping))
        code, stderr = build(cli, small_registry, out)
        assert code == 4, (escaping, stderr)
        assert "a path outside the output folder" in one_error_line(stderr)
        assert victim.read_text() == VICTIM_TEXT
        assert not (out / "index.html").exists()  # nothing was written


def test_a_sealed_build_removes_its_stale_files_but_never_a_link(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old").mkdir()
    (out / "old" / "page.html").write_text("a page of an earlier build")
    (out / "unlisted.html").write_text("not kictl's")
    seal_as_kictl(out, forged_manifest("old/page.html"))
    code, stderr = build(cli, small_registry, out)
    assert code == 0, stderr
    assert not (out / "old" / "page.html").exists()
    assert (out / "unlisted.html").exists()

    (out / "stale").symlink_to(victim.parent, target_is_directory=True)
    seal_as_kictl(out, forged_manifest(f"stale/{victim.name}"))
    code, stderr = build(cli, small_registry, out)
    assert code == 4, stderr
    assert "stale is a symbolic link" in one_error_line(stderr)
    assert victim.read_text() == VICTIM_TEXT

    (out / "stale").unlink()
    (out / "linked.html").symlink_to(victim)
    seal_as_kictl(out, forged_manifest("linked.html"))
    code, stderr = build(cli, small_registry, out)
    assert code == 4, stderr
    assert victim.read_text() == VICTIM_TEXT


def test_site_parts_keep_names_inside_out() -> None:
    assert site_parts("r/sha256:ab/index.html") == ("r", "sha256:ab", "index.html")
    for bad in ("", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", "a\0b"):
        with pytest.raises(RegistryError):
            site_parts(bad)


def test_a_page_path_outside_out_is_refused_by_the_writer(tmp_path: Path, victim: Path) -> None:
    with SiteFolder.open(tmp_path / "out") as folder:
        for name in ("../victim.txt", str(victim)):
            with pytest.raises(RegistryError, match="not a path inside the output folder"):
                folder.write(name, b"x")
        assert folder.write("a/b.html", b"x")
        assert not folder.write("a/b.html", b"x")  # unchanged bytes are not written again
    assert victim.read_text() == VICTIM_TEXT


def test_a_definition_named_like_a_path_stays_inside_out(cli: RunCli, tmp_path: Path, victim: Path) -> None:
    root = tmp_path / "registry"
    create_registry(root)
    registry = Registry(root)
    records = build_records()
    raw = json.loads(json.dumps(records.definition.raw))
    raw["metadata"]["name"] = raw["spec"]["name"] = "../../victim"
    registry.add([*records.all(), record_from_value(raw)])
    out = tmp_path / "deep" / "out"
    code, stderr = build(cli, root, out)
    assert code == 0, stderr
    assert victim.read_text() == VICTIM_TEXT
    assert not (tmp_path / "deep" / "victim").exists()
    assert sorted(path.name for path in (out / "d").iterdir()) == ["..-..-victim", "scale_h8"]  # its slug


def test_a_hard_linked_page_is_replaced_never_written_into(
    cli: RunCli, small_registry: Path, tmp_path: Path, victim: Path
) -> None:
    """A page that shares its inode with a file outside is replaced by a rename: the outside file keeps its bytes."""
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    os.link(victim, artifact / "style.css")
    code, stderr = build(cli, small_registry, artifact, "--force")
    assert code == 0, stderr
    assert victim.read_text() == VICTIM_TEXT
    assert (artifact / "style.css").read_text() != VICTIM_TEXT
