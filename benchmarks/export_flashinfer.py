"""What `kictl export flashinfer-trace` exports from a registry for one GPU, and what it leaves out and why.

Claim (README.md "From the index into serving", docs/exporting.md; RESULTS.md "Export of the bundled
registry"): the export holds only verified #1 runs on one GPU and says why every other run was left out.
Machine and command: any CPU, `python benchmarks/export_flashinfer.py --gpu H200`.

Prints two tables: the exported traces (definition, workload, implementation,
run, evidence) and the runs left out, counted per definition and reason.  With
``--require-generalizes`` only winners a verifier found correct on held-out
shapes are exported.  Run it from the repository root (the bundled registry)
or pass ``--registry``; it writes the export into a temporary folder and
removes it.

    python benchmarks/export_flashinfer.py --gpu H200 [--require-generalizes] [--registry DIR]
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from kictl.exporters.flashinfer_trace import NothingToExport, export_flashinfer_trace
from kictl.render import table
from kictl.store.registry import Registry


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H200")
    parser.add_argument("--evidence", default="verified")
    parser.add_argument("--require-generalizes", action="store_true")
    parser.add_argument("--registry", type=Path, default=None)
    args = parser.parse_args()
    registry = Registry.locate(args.registry)
    with tempfile.TemporaryDirectory() as scratch:
        try:
            report = export_flashinfer_trace(
                registry,
                Path(scratch) / "export",
                gpu=args.gpu,
                min_evidence=args.evidence,
                require_generalizes=args.require_generalizes,
            )
        except NothingToExport as exc:
            print(exc.message)
            return
    rows = [
        [item.definition, item.workload, item.implementation, item.run[:19], item.evidence] for item in report.exported
    ]
    print(f"exported: {len(report.exported)} trace(s) on {report.gpu} at evidence {report.min_evidence} or above")
    for line in table(["definition", "workload", "implementation", "run", "evidence"], rows):
        print(line)
    counts = Counter((item.definition, item.reason) for item in report.left_out)
    print()
    print(f"left out: {len(report.left_out)} run(s)")
    for line in table(
        ["definition", "runs", "reason"],
        [[definition, str(count), reason] for (definition, reason), count in sorted(counts.items())],
        right=(1,),
    ):
        print(line)


if __name__ == "__main__":
    main()
