"""A registry made by ``kictl init`` is private until it says where it publishes (issue 45).

``kictl init`` used to give every new registry kernelindex.dev's permalink base, so ``cite`` in a private
registry pointed readers at pages that do not exist there.  Now the base is empty unless
``--permalink-base`` gives one, and a citation without one names the digest, the registry's own
location (its origin remote, credentials removed, else its folder) and the record's file.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kictl import canon
from tests import factories
from tests.conftest import RunCli


def _registry_with_a_definition(cli: RunCli, root: Path, *extra: str) -> str:
    result = cli("init", root, *extra)
    assert result.exit_code == 0, result.output
    chain = root.parent / "chain.json"
    chain.write_text(json.dumps({"definition": factories.definition()}))
    assert cli("add", chain, "--registry", root).exit_code == 0
    return canon.record_digest(factories.definition())


def test_init_leaves_the_permalink_base_empty_and_cite_names_the_registry(cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "private"
    digest = _registry_with_a_definition(cli, root)
    assert json.loads((root / "registry" / "policy.json").read_text())["permalinkBase"] == ""
    path = f"registry/records/Definition/{digest[7:9]}/{digest[7:]}.json"
    cited = json.loads(cli("cite", "gemm_tiny", "--json", "--registry", root).stdout)
    assert (cited["permalink"], cited["location"], cited["path"]) == (None, str(root.resolve()), path)
    text = cli("cite", "gemm_tiny", "--registry", root)
    assert text.exit_code == 0, text.output
    assert "kernelindex.dev" not in text.stdout
    assert f"KernelIndex registry at {root.resolve()}" in " ".join(text.stdout.split())
    # a clone's origin is where others find it: named without the credentials in its URL
    subprocess.run(["git", "-C", str(root), "remote", "add", "origin", "https://bob:s3cret@git.example.org/t/k.git"],
                   check=True)  # fmt: skip
    bibtex = cli("cite", "gemm_tiny", "--format", "bibtex", "--registry", root).stdout
    assert f"howpublished = {{KernelIndex registry at https://git.example.org/t/k.git ({path})}}," in bibtex
    assert "s3cret" not in bibtex
    assert "kernelindex.dev" not in bibtex


def test_init_takes_a_permalink_base_and_refuses_one_that_is_no_url(cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "public"
    digest = _registry_with_a_definition(cli, root, "--permalink-base", "https://kernels.example.org/r/")
    cited = json.loads(cli("cite", "gemm_tiny", "--json", "--registry", root).stdout)
    assert cited["permalink"] == f"https://kernels.example.org/r/{digest}"
    refused = cli("init", tmp_path / "other", "--permalink-base", "kernels.example.org")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.startswith("error: --permalink-base 'kernels.example.org': give an http(s) URL")
    assert not (tmp_path / "other").exists()
