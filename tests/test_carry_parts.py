"""benchmarks/carry_parts.sh: wheels too large for one device call, split in two carries and joined there, run
here with real zip, xz and tar on real wheels' layout (a wheel is a zip of the files pip --target puts in place)."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "benchmarks" / "carry_parts.sh"


def _parts(*args: str | int | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", SCRIPT, *map(str, args)], capture_output=True, text=True, env=dict(os.environ))


def _wheels(folder: Path) -> dict[str, bytes]:
    """Two wheels, one with a large incompressible library (as nvidia-cutlass-dsl-libs-cu13's), and the files
    they hold, by the path they take in a site folder."""
    folder.mkdir()
    files = {
        "nvidia_cutlass_dsl/cu13/lib/libcute_dsl_runtime.so": os.urandom(300_000),
        "nvidia_cutlass_dsl/dsl_packages/cutlass/__init__.py": b"VERSION = '4.8.1'\n",
        "nvidia_cutlass_dsl-4.8.1.dist-info/METADATA": b"Name: nvidia-cutlass-dsl\n",
        "nvidia_cutlass_dsl_packages.pth": b"import sys\n",
    }
    names = list(files)
    for wheel, own in (("libs", names[:1]), ("dsl", names[1:])):
        with zipfile.ZipFile(folder / f"{wheel}-4.8.1-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as archive:
            for name in own:
                archive.writestr(name, files[name])
    return files


def test_split_then_join_puts_every_wheel_s_files_in_the_site_once(tmp_path: Path) -> None:
    files = _wheels(tmp_path / "wheels")
    dirs = [tmp_path / ".carry_a", tmp_path / ".carry_b", tmp_path / ".carry_c"]
    site = tmp_path / "site"
    split = _parts("split", tmp_path / "wheels", 120_000, *dirs)  # 300 kB of random bytes: three parts
    assert split.returncode == 0, split.stderr
    sizes = [(folder / f"part.{i}").stat().st_size for i, folder in enumerate(dirs)]
    assert sizes[:2] == [120_000, 120_000]  # what one call carries, at most
    assert 0 < sizes[2] <= 120_000
    assert sorted(path.name for path in dirs[2].iterdir()) == ["part.2", "part.sha256"]
    joined = _parts("join", site, *dirs)
    assert joined.returncode == 0, joined.stderr
    for name, content in files.items():
        assert (site / name).read_bytes() == content, name
    # joined once: a second setup on the warm machine leaves the site as it is
    (site / "nvidia_cutlass_dsl_packages.pth").write_bytes(b"touched\n")
    again = _parts("join", site, *dirs)
    assert again.returncode == 0, again.stderr
    assert (site / "nvidia_cutlass_dsl_packages.pth").read_bytes() == b"touched\n"


def test_join_does_nothing_without_parts_and_refuses_a_missing_or_foreign_part(tmp_path: Path) -> None:
    _wheels(tmp_path / "wheels")
    a, b, site = tmp_path / ".carry_a", tmp_path / ".carry_b", tmp_path / "site"
    nothing = _parts("join", site, a, b)  # the usual call: no part carried, nothing done, setup goes on
    assert nothing.returncode == 0, nothing.stderr
    assert not site.exists()
    too_few = _parts("split", tmp_path / "wheels", 100_000, a, b)  # 300 kB of random bytes: four parts
    assert too_few.returncode == 2
    assert "4 parts of 100000, and 2 folders were named" in too_few.stderr
    assert _parts("split", tmp_path / "wheels", 200_000, a, b).returncode == 0
    (a / "part.0").rename(tmp_path / "part.0")  # the first call's part lost (the machine was not kept warm)
    missing = _parts("join", site, a, b)
    assert missing.returncode == 1
    assert "a part is missing (2 expected, 1 here)" in missing.stderr
    (tmp_path / "part.0").rename(a / "part.0")
    with (b / "part.1").open("ab") as tail:  # a part from another split
        tail.write(b"x")
    foreign = _parts("join", site, a, b)
    assert foreign.returncode == 1
    assert "do not make the whole" in foreign.stderr
    assert not (site / "nvidia_cutlass_dsl").exists()


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _parts().returncode == 2
    assert _parts("join", tmp_path).returncode == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    for bad in ("0", "-5", "30MB", ""):
        refused = _parts("split", empty, bad, tmp_path / "a")
        assert refused.returncode == 2, bad
        assert "BYTES must be a whole number above 0" in refused.stderr
    no_wheel = _parts("split", empty, 10, tmp_path / "a", tmp_path / "b")
    assert no_wheel.returncode == 2
    assert "no wheel" in no_wheel.stderr


def test_the_usual_wheels_pack_as_one_part_beside_a_two_part_set_and_keep_their_executable_bit(
    tmp_path: Path,
) -> None:
    """benchmarks/carry.sh packs the usual wheels into .whl/ as one part; h200_setup.sh joins them and then a set
    of several parts into one site, each once."""
    cutlass = _wheels(tmp_path / "cutlass")
    usual = tmp_path / "usual"
    usual.mkdir()
    info = zipfile.ZipInfo("pydantic_core/_pydantic_core.so")
    info.external_attr = 0o100755 << 16
    with zipfile.ZipFile(usual / "pydantic_core-2.50.5-cp312-cp312-any.whl", "w") as archive:
        archive.writestr(info, b"\x7fELF")
        archive.writestr("pydantic_core/__init__.py", b"")
    whl, a, b, site = tmp_path / ".whl", tmp_path / ".carry_a", tmp_path / ".carry_b", tmp_path / "site"
    assert _parts("split", usual, 10**12, whl).returncode == 0
    assert sorted(path.name for path in whl.iterdir()) == ["part.0", "part.sha256"]
    assert _parts("split", tmp_path / "cutlass", 200_000, a, b).returncode == 0
    for round_ in range(2):
        for dirs in ((whl,), (a, b)):
            joined = _parts("join", site, *dirs)
            assert joined.returncode == 0, joined.stderr
        if round_ == 0:
            (site / "pydantic_core/__init__.py").write_bytes(b"# touched\n")
            (site / "nvidia_cutlass_dsl_packages.pth").write_bytes(b"# touched\n")
    # the second round unpacked neither set again: each kept its own mark
    assert (site / "pydantic_core/__init__.py").read_bytes() == b"# touched\n"
    assert (site / "nvidia_cutlass_dsl_packages.pth").read_bytes() == b"# touched\n"
    del cutlass["nvidia_cutlass_dsl_packages.pth"]
    assert os.access(site / "pydantic_core/_pydantic_core.so", os.X_OK)
    assert not os.access(site / "pydantic_core/__init__.py", os.X_OK)
    for name, content in cutlass.items():
        assert (site / name).read_bytes() == content, name
