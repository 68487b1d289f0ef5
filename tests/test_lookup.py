"""One resolver for "digest | 8+ hex prefix | name" (kictl.lookup), and every command that takes a record uses it.

The same references are fed to ``show``, ``verify``, ``sign``, ``cite``,
``history``, ``diff``, ``leaderboard`` and ``floor`` (and to
``lookup.resolve_among``, what ``bench --workload`` resolves with): each form
must name the same record everywhere, and each bad form must exit 3 everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kictl import lookup
from kictl.errors import NotFoundError
from kictl.records import StoredRecord
from tests.conftest import RunCli
from tests.rank.conftest import World

UUID = "547e0ce5-e484-4e0c-8b38-f153fb7ce6d4"


@dataclass(frozen=True)
class Registered:
    world: World
    definition: StoredRecord
    workload: StoredRecord
    other_workload: StoredRecord
    run: StoredRecord


@pytest.fixture(scope="module")
def registered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registered]:
    with pytest.MonkeyPatch.context() as patch:
        for variable in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
            patch.setenv(variable, "Test Author")
        for variable in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
            patch.setenv(variable, "author@example.org")
        world = World(tmp_path_factory.mktemp("lookup") / "registry-root")
        definition = world.definition()
        workload = world.workload(definition, UUID, 128)
        other = world.workload(definition, "m1", 1)
        implementation = world.implementation(definition, "fast")
        protocol, environment = world.protocol(), world.environment("NVIDIA H200")
        run = world.run(workload, implementation, protocol, environment, 1000, name="run-fast-uuid-h200")
        world.run(other, implementation, protocol, environment, 800, name="run-fast-m1-h200")
        world.commit("records")
        yield Registered(world, definition, workload, other, run)


def forms(record: StoredRecord, name_prefix: str) -> dict[str, str]:
    """Every way a user may name ``record``."""
    hex_digest = record.digest.removeprefix("sha256:")
    return {
        "digest": record.digest,
        "bare hex": hex_digest,
        "sha256 prefix": "sha256:" + hex_digest[:8],
        "hex prefix": hex_digest[:8],
        "name": record.name,
        "name prefix": name_prefix,
    }


BAD = {
    "short sha256 prefix": ("sha256:" + "0" * 7, "needs at least 8 hex digits"),
    "unknown digest": ("sha256:" + "0" * 64, "no "),
    "unknown name": ("no_such_record", "named or digested 'no_such_record'"),
}


# --------------------------------------------------------------------------- the resolver alone


def test_one_order_digest_then_name_then_name_prefix() -> None:
    hexish = lookup.Match("sha256:" + "ab" * 32, "deadbeefcafe", "Workload")
    named_like_hex = lookup.Match("sha256:" + "12" * 32, "abababab", "Workload")
    uuid = lookup.Match("sha256:" + "34" * 32, UUID, "Workload")
    catalogue = lookup.ListCatalogue([hexish, named_like_hex, uuid])
    assert lookup.resolve("abababab", catalogue) == hexish  # a digest prefix wins over a name
    assert lookup.resolve("deadbeefcafe", catalogue) == hexish  # hex that no digest starts with: a name
    assert lookup.resolve("547e0ce5", catalogue) == uuid  # 8 characters of a uuid label
    with pytest.raises(NotFoundError, match="no record named or digested '547e0ce'"):
        lookup.resolve("547e0ce", catalogue)  # 7 are too few, for names as for digests
    with pytest.raises(NotFoundError, match="a digest prefix needs at least 8 hex digits"):
        lookup.resolve("sha256:abababa", catalogue)


def test_a_too_short_hex_prefix_asks_for_8_digits_not_for_a_close_name() -> None:
    """Issue 13: a 6-digit prefix got an unrelated "closest known" list; it must say what to give."""
    records = [lookup.Match("sha256:4bcff5ca" + "0" * 56, "b1_kv4096", "Workload")]
    records += [lookup.Match("sha256:" + f"{n:02x}" * 32, f"b{n}_kv4096", "Workload") for n in range(5)]
    catalogue = lookup.ListCatalogue(records)
    for reference in ("4bcff5", "4BCFF5C", "4bcf"):
        with pytest.raises(NotFoundError, match=r"needs at least 8 hex digits \(\d given\)") as caught:
            lookup.resolve(reference, catalogue)
        assert "closest known" not in caught.value.diagnostics()
        assert "1 digest(s) start with" in caught.value.diagnostics()
    # hex that starts no digest, or is too short to be meant as one, is a name: "b3" is a workload label
    for reference in ("b3", "abcd", "4bc"):
        with pytest.raises(NotFoundError, match=f"named or digested '{reference}'"):
            lookup.resolve(reference, catalogue)
    hexish = lookup.Match("sha256:" + "77" * 32, "add", "Definition")
    assert lookup.resolve("add", lookup.ListCatalogue([*records, hexish])) == hexish  # a short hex name still works
    beef = lookup.Match("sha256:" + "88" * 32, "beef", "Definition")
    assert lookup.resolve("beef", lookup.ListCatalogue([*records, beef])) == beef  # a name first, then the prefix rule


def test_ambiguity_lists_the_candidates() -> None:
    one = lookup.Match("sha256:abcdef01" + "0" * 56, "m1", "Workload")
    two = lookup.Match("sha256:abcdef01" + "1" * 56, "m1", "Workload")
    catalogue = lookup.ListCatalogue([one, two])
    with pytest.raises(NotFoundError, match="workload digest prefix abcdef01 is ambiguous") as caught:
        lookup.resolve("abcdef01", catalogue, what="workload")
    assert caught.value.candidates == (f"{one.digest} (Workload m1)", f"{two.digest} (Workload m1)")
    with pytest.raises(NotFoundError, match="names 2 records; give a digest"):
        lookup.resolve("m1", catalogue)


def test_resolve_among_is_what_bench_resolves_workloads_with(registered: Registered) -> None:
    workloads = [registered.workload, registered.other_workload]
    for form, reference in forms(registered.workload, UUID[:8]).items():
        assert lookup.resolve_among(reference, workloads, what="workload") is registered.workload, form
    for reference, message in BAD.values():
        with pytest.raises(NotFoundError, match=message):
            lookup.resolve_among(reference, workloads, what="workload")


# --------------------------------------------------------------------------- every command


def _record_commands(reference: str, root: Path, key: Path) -> dict[str, list[str | Path]]:
    return {
        "show": ["show", reference, "--registry", root],
        "verify": ["verify", reference, "--registry", root],
        "sign": ["sign", reference, "--key", key, "--registry", root],
        "cite": ["cite", reference, "--format", "json", "--registry", root],
        "history": ["history", reference, "--registry", root],
        "diff": ["diff", reference, reference, "--registry", root],
    }


@pytest.mark.slow
def test_every_record_command_takes_every_form(cli: RunCli, registered: Registered, tmp_path: Path) -> None:
    root = registered.world.registry.root
    key = tmp_path / "reviewer.key"
    assert cli("keygen", "--out", key, "--owner", "reviewer").exit_code == 0
    repository = registered.world.registry.git.repo.git
    for form, reference in forms(registered.run, "run-fast-uuid").items():
        for command, args in _record_commands(reference, root, key).items():
            result = cli(*args)
            # verify says 1 (a check said no) for a record signed by a key outside the trust root
            assert result.exit_code in ((0, 1) if command == "verify" else (0,)), (form, command, result.output)
            assert "named or digested" not in result.output, (form, command)
        repository.clean("-fdq", "registry/attestations")
    for form, (reference, message) in BAD.items():
        for command, args in _record_commands(reference, root, key).items():
            result = cli(*args)
            assert result.exit_code == 3, (form, command, result.output)
            # diff also takes git revisions, so it says that a reference is neither
            expected = "is neither a record of the registry nor a git revision" if command == "diff" else message
            assert expected in result.stderr, (form, command, result.stderr)


def test_leaderboard_and_floor_take_every_form(cli: RunCli, registered: Registered) -> None:
    root = registered.world.registry.root
    definitions = forms(registered.definition, registered.definition.name[:10])
    workloads = forms(registered.workload, UUID[:8])
    for (d_form, definition), (w_form, workload) in zip(definitions.items(), workloads.items(), strict=True):
        board = cli("leaderboard", definition, "--workload", workload, "--registry", root, "--json")
        assert board.exit_code == 0, (d_form, w_form, board.output)
        assert registered.workload.digest in board.stdout
        floor = cli("floor", definition, "--workload", workload, "--gpu", "H200", "--registry", root, "--json")
        assert floor.exit_code == 0, (d_form, w_form, floor.output)
        assert registered.workload.digest in floor.stdout
    for form, (reference, message) in BAD.items():
        for args in (
            ["leaderboard", reference, "--registry", root],
            ["floor", reference, "--gpu", "H200", "--registry", root],
            ["leaderboard", registered.definition.name, "--workload", reference, "--registry", root],
            ["floor", registered.definition.name, "--workload", reference, "--gpu", "H200", "--registry", root],
        ):
            result = cli(*args)
            assert result.exit_code == 3, (form, args, result.output)
            assert message in result.stderr, (form, args, result.stderr)
