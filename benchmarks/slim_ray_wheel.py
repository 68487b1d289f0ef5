#!/usr/bin/env python
"""A Ray wheel slim enough to carry to the lent GPU machine (its calls carry at most 64 MiB).

Ray's manylinux wheel is 79 MB, 32 MB of it the Java jar. ``kictl --executor ray`` needs Ray's core
(``_raylet.so``, the raylet and GCS server binaries, the Python API), not Java, the dashboard's web client,
or the RLlib, Tune, Train, Serve, Data and LLM libraries::

    python benchmarks/slim_ray_wheel.py ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl .whl_ray/

writes the same wheel without those folders (and without their lines in ``RECORD``), so that
``pip install --no-deps`` installs it as usual. Carry it with the jsonschema family, which the GPU image
lacks (``jsonschema``, ``jsonschema-specifications``, ``referencing``, ``rpds-py``).
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = (
    "ray/jars/",
    "ray/dashboard/client/",
    "ray/rllib/",
    "ray/tune/",
    "ray/train/",
    "ray/serve/",
    "ray/data/",
    "ray/llm/",
)


def slim(source: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / source.name
    with zipfile.ZipFile(source) as given, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as out:
        for item in given.infolist():
            if item.filename.startswith(DROP):
                continue
            data = given.read(item)
            if item.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines(keepends=True)
                data = "".join(line for line in lines if not line.startswith(DROP)).encode()
            out.writestr(item, data)
    return target


if __name__ == "__main__":
    made = slim(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{made}: {made.stat().st_size / 1e6:.1f} MB")
