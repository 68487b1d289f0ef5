"""The pages of the site (DESIGN §2): each ``render_*`` returns the files of one page, HTML and JSON.

A renderer lays out what the core computed (``SiteContext`` holds the core's
answers); it never ranks, compares or judges.  Site paths:

* ``index.html``: definitions by family, counts, the latest records, the evidence legend;
* ``d/<name>/``: a definition (a name shared by several Definition records gets ``<name>.<hex12>``);
* ``g/<key hex>/``: a comparison group, ranked in full, with its #1 over time;
* ``r/sha256:<hex>/``: a BenchmarkRun, the path of its permalink (``policy.permalinkBase`` + digest);
* ``i/<hex>/``: an implementation;  ``gpu/<product>/``: a GPU.

A record that fails verification (``kictl verify`` lists failures: a file whose
bytes no longer hash to its name, a broken reference, a bad signature) is
marked "fails verification" wherever it appears, and its run page opens with
the failures; a run without a valid submission signature is marked
"unsigned".
"""

from __future__ import annotations

from kictl.site.pages.common import (
    Files,
    definition_path,
    gpu_path,
    gpu_products,
    group_path,
    implementation_path,
    run_path,
    stylesheet,
)
from kictl.site.pages.definition import render_definition
from kictl.site.pages.group import render_group
from kictl.site.pages.implementation import render_gpu, render_implementation
from kictl.site.pages.index import render_index
from kictl.site.pages.run import render_run

__all__ = [
    "Files",
    "definition_path",
    "gpu_path",
    "gpu_products",
    "group_path",
    "implementation_path",
    "render_definition",
    "render_gpu",
    "render_group",
    "render_implementation",
    "render_index",
    "render_run",
    "run_path",
    "stylesheet",
]
