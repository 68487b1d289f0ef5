"""Small valid records of every kind, built as JSON the way a user would write them."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

API = "kernelindex.dev/v1alpha1"
REFERENCE = "import torch\n\n\ndef run(A, B):\n    return torch.matmul(A.float(), B.float().t()).half()\n"


def definition(name: str = "gemm_tiny", k: int = 8) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Definition",
        "metadata": {"name": name, "title": "A tiny GEMM"},
        "spec": {
            "name": name,
            "family": "gemm",
            "description": "C = A @ B.T",
            "axes": {"M": {"type": "var"}, "N": {"type": "const", "value": 4}, "K": {"type": "const", "value": k}},
            "inputs": {"A": {"shape": ["M", "K"], "dtype": "float16"}, "B": {"shape": ["N", "K"], "dtype": "float16"}},
            "outputs": {"C": {"shape": ["M", "N"], "dtype": "float16"}},
            "reference": REFERENCE,
        },
    }


def workload(definition_digest: str, m: int = 2, name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": {"name": name or f"m{m}"},
        "spec": {
            "definitionDigest": definition_digest,
            "axes": {"M": m},
            "inputs": {"A": {"type": "random", "seed": 1}, "B": {"type": "random", "seed": 2}},
        },
    }


def implementation(definition_digest: str, name: str = "torch_matmul") -> dict[str, Any]:
    content = "import torch\n\n\ndef run(A, B):\n    return A @ B.t()\n"
    return {
        "apiVersion": API,
        "kind": "Implementation",
        "metadata": {"name": name},
        "spec": {
            "name": name,
            "definitionDigest": definition_digest,
            "runtime": "python",
            "entryPoint": "main.py::run",
            "sources": [
                {"path": "main.py", "sha256": hashlib.sha256(content.encode()).hexdigest(), "content": content}
            ],
            "dependencies": {"torch": ">=2.4"},
        },
    }


def protocol(family: str = "kictl-cuda-events") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "BenchmarkProtocol",
        "metadata": {"name": "kictl-default"},
        "spec": {
            "harness": {"name": "kictl", "version": "0.1.0"},
            "correctness": {"reference": "definition reference", "comparator": "allclose", "atol": 0.01, "rtol": 0.01},
            "measurement": {"timer": "cuda_events", "primaryStatistic": "median", "warmup": 10, "iterations": 100},
            "comparability": {"family": family},
        },
    }


def environment(product: str = "H200") -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ExecutionEnvironment",
        "metadata": {"name": f"{product.lower()}-env"},
        "spec": {
            "hardware": {"vendor": "NVIDIA", "product": product, "architecture": "sm_90"},
            "software": {"framework": {"name": "pytorch", "version": "2.11.0"}, "cudaToolkit": "13.0"},
        },
    }


def run(
    *,
    definition_digest: str,
    workload_digest: str,
    implementation_digest: str,
    protocol_digest: str,
    environment_digest: str,
    median_ns: int = 12_500,
    status: str = "passed",
    observed_at: str = "2026-11-30T07:31:00.000Z",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "status": status,
        "observedAt": observed_at,
        "definitionDigest": definition_digest,
        "workloadDigest": workload_digest,
        "implementationDigest": implementation_digest,
        "protocolDigest": protocol_digest,
        "environmentDigest": environment_digest,
        "correctness": {"comparator": "allclose", "maximumAbsoluteError": 0.001, "maximumRelativeError": 0.002},
    }
    if status == "passed":
        spec["timing"] = {
            "latencyNs": {"median": median_ns, "mean": median_ns + 100, "p10": median_ns - 50, "p90": median_ns + 200},
            "primaryStatistic": "median",
        }
    return {"apiVersion": API, "kind": "BenchmarkRun", "metadata": {"name": f"run-{median_ns}"}, "spec": spec}


def chain() -> dict[str, dict[str, Any]]:
    """A consistent set: definition, workload, implementation, protocol, environment, run."""
    from kictl.canon import record_digest

    d = definition()
    w = workload(record_digest(d))
    i = implementation(record_digest(d))
    p = protocol()
    e = environment()
    r = run(
        definition_digest=record_digest(d),
        workload_digest=record_digest(w),
        implementation_digest=record_digest(i),
        protocol_digest=record_digest(p),
        environment_digest=record_digest(e),
    )
    return copy.deepcopy(
        {"definition": d, "workload": w, "implementation": i, "protocol": p, "environment": e, "run": r}
    )
