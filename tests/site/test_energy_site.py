"""The site's energy board (issue 31): beside the latency boards, an SVG per workload, ``energy.json``."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kictl.rank.energy import ENERGY_FAMILY
from kictl.site import build_site
from tests.conftest import RunCli
from tests.rank.conftest import World
from tests.rank.test_energy_rank import energy_run


def _energy_cells(page: str) -> list[list[str]]:
    """The text of each body row's cells in the page's first energy table."""
    table = page[page.index('id="energy-table-1"') :]
    body = table[table.index("<tbody>") : table.index("</tbody>")]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", body)
    ]


def test_the_definition_page_shows_the_energy_board_and_its_plot(tmp_path: Path, cli: RunCli) -> None:
    world = World(tmp_path / "registry-root")
    definition = world.definition()
    parts = {
        "definition": definition,
        "m128": world.workload(definition, "m128", 128),
        "fast": world.implementation(definition, "fast"),
        "hungry": world.implementation(definition, "torch_sdpa_hungry"),
        "frugal": world.implementation(definition, "frugal"),
        "protocol": world.protocol(),
        "energy_protocol": world.protocol(ENERGY_FAMILY),
        "h200": world.environment("NVIDIA H200"),
    }
    world.run(parts["m128"], parts["fast"], parts["protocol"], parts["h200"], 10_000)
    honest = energy_run(world, parts, "m128", "fast", 0.138, 11_000_000)
    greedy = energy_run(world, parts, "m128", "hungry", 0.222, 11_400_000)
    frugal = energy_run(world, parts, "m128", "frugal", 0.100, 30_000_000)
    world.commit("runs")
    out = tmp_path / "site"
    build_site(world.registry, out)
    pages = list(out.rglob("energy.json"))
    assert len(pages) == 1
    board = json.loads(pages[0].read_text())
    (group,) = board["groups"]
    assert [row["run"] for row in group["rows"]] == [frugal.digest, honest.digest, greedy.digest]
    assert [row["pareto"] for row in group["rows"]] == [True, True, False]
    html = (pages[0].parent / "index.html").read_text()
    assert html.index('id="energy"') > html.index("board-1")  # after the latency board
    assert "Energy per call" in html
    assert "Board power, not the kernel" in html
    svg = (pages[0].parent / "energy.1.svg").read_text()
    assert "Pareto front" in svg
    # the site writes each figure as `kictl leaderboard --metric energy` does (kictl.render): joules, watts, idle
    # watts, spread and latency of every row appear, the same text, on the command's line for that run
    text = cli("leaderboard", "gemm_n64_k64", "--metric", "energy", "--registry", world.registry.root)
    assert text.exit_code == 0, text.output
    assert "700 W limit" in html
    assert "power limit 700 W" in text.stdout
    cells = _energy_cells(html)
    assert [row[1] for row in cells] == ["frugal", "fast", "torch_sdpa_hungry"]
    lines = {row[1]: next(line for line in text.stdout.splitlines() if f" {row[1]} " in line) for row in cells}
    for row in cells:
        figures = [row[2], row[4], row[5], row[6], row[7]]  # J/call, W, idle W, spread, latency
        assert figures[0] in ("100 mJ", "138 mJ", "222 mJ")
        for figure in figures:
            assert f" {figure} " in f" {lines[row[1]]} ", (figure, lines[row[1]])
    assert "torch_sdpa_hungry" in svg
