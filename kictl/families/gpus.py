"""A datasheet table of GPUs: memory bandwidth and dense peak rates per dtype.

Every figure is the vendor's published number for the part, dense (no
structured sparsity), with the document it comes from named in ``source``.
They are upper bounds a kernel cannot beat, which is what a floor needs
(docs/leaderboards.md): the floor of a workload is never more than the true minimum time.

Rates per dtype are for the matrix units where the part has them (the rate a
GEMM or attention kernel can reach).  ``float32`` uses the TF32 tensor rate
because a kernel may legally compute a float32 product in TF32, and a floor
must not flag a run that did so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TERA = 1e12


@dataclass(frozen=True, slots=True)
class GPU:
    """One GPU product as its datasheet gives it."""

    product: str
    vendor: str
    architecture: str
    memory_bandwidth: float  # bytes per second
    peak_flops: dict[str, float]  # dtype -> dense FLOP/s
    source: str
    aliases: tuple[str, ...] = field(default_factory=tuple)

    def peak_for(self, dtype: str) -> tuple[float, str]:
        """The dense peak for ``dtype`` and the dtype whose figure was used."""
        if dtype in self.peak_flops:
            return self.peak_flops[dtype], dtype
        # integers and unknown types: the fastest figure is a safe upper bound
        best = max(self.peak_flops, key=lambda name: self.peak_flops[name])
        return self.peak_flops[best], best


def _rates(**tflops: float) -> dict[str, float]:
    return {name: value * TERA for name, value in tflops.items()}


GPUS: tuple[GPU, ...] = (
    GPU(
        product="B200",
        vendor="NVIDIA",
        architecture="sm_100",
        memory_bandwidth=8.0e12,
        peak_flops=_rates(float8_e4m3fn=4500, float8_e5m2=4500, bfloat16=2250, float16=2250, float32=1100, float64=40),
        source="NVIDIA DGX B200 / HGX B200 datasheet (2024): per GPU 8 TB/s HBM3e; dense FP8 4.5 PFLOPS, "
        "FP16/BF16 2.25 PFLOPS, TF32 1.1 PFLOPS (half the sparse figures), FP64 40 TFLOPS",
        aliases=("NVIDIA B200", "B200 SXM"),
    ),
    GPU(
        product="H200",
        vendor="NVIDIA",
        architecture="sm_90",
        memory_bandwidth=4.8e12,
        peak_flops=_rates(
            float8_e4m3fn=1979, float8_e5m2=1979, bfloat16=989.5, float16=989.5, float32=494.5, float64=67
        ),
        source="NVIDIA H200 Tensor Core GPU datasheet (2024), SXM: 4.8 TB/s HBM3e; dense FP8 1,979 TFLOPS, "
        "BF16/FP16 989.5 TFLOPS, TF32 494.5 TFLOPS (half the sparse figures), FP64 tensor 67 TFLOPS",
        aliases=("NVIDIA H200", "H200 SXM", "NVIDIA H200 SXM", "H200 141GB"),
    ),
    GPU(
        product="H100 SXM",
        vendor="NVIDIA",
        architecture="sm_90",
        memory_bandwidth=3.35e12,
        peak_flops=_rates(
            float8_e4m3fn=1979, float8_e5m2=1979, bfloat16=989.5, float16=989.5, float32=494.5, float64=67
        ),
        source="NVIDIA H100 Tensor Core GPU datasheet (2023), SXM5 80GB: 3.35 TB/s HBM3; dense FP8 1,979 TFLOPS, "
        "BF16/FP16 989.5 TFLOPS, TF32 494.5 TFLOPS, FP64 tensor 67 TFLOPS",
        aliases=("NVIDIA H100", "H100", "NVIDIA H100 80GB HBM3", "H100 80GB HBM3", "H100 SXM5", "NVIDIA H100 SXM"),
    ),
    GPU(
        product="H100 PCIe",
        vendor="NVIDIA",
        architecture="sm_90",
        memory_bandwidth=2.0e12,
        peak_flops=_rates(float8_e4m3fn=1513, float8_e5m2=1513, bfloat16=756, float16=756, float32=378, float64=51),
        source="NVIDIA H100 Tensor Core GPU datasheet (2023), PCIe 80GB: 2 TB/s HBM2e; dense FP8 1,513 TFLOPS, "
        "BF16/FP16 756 TFLOPS, TF32 378 TFLOPS, FP64 tensor 51 TFLOPS",
        aliases=("NVIDIA H100 PCIe", "H100 PCIE", "NVIDIA H100 PCIe 80GB"),
    ),
    GPU(
        product="A100 SXM 80GB",
        vendor="NVIDIA",
        architecture="sm_80",
        memory_bandwidth=2.039e12,
        peak_flops=_rates(bfloat16=312, float16=312, float32=156, float64=19.5, int8=624),
        source="NVIDIA A100 Tensor Core GPU datasheet (2021), SXM 80GB: 2,039 GB/s HBM2e; dense BF16/FP16 312 TFLOPS, "
        "TF32 156 TFLOPS, FP64 tensor 19.5 TFLOPS, INT8 624 TOPS",
        aliases=("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB", "A100 80GB", "A100 SXM4 80GB"),
    ),
    GPU(
        product="L40S",
        vendor="NVIDIA",
        architecture="sm_89",
        memory_bandwidth=864e9,
        peak_flops=_rates(
            float8_e4m3fn=733, float8_e5m2=733, bfloat16=362.05, float16=362.05, float32=183, float64=1.4
        ),
        source="NVIDIA L40S datasheet (2023): 864 GB/s GDDR6; dense FP8 733 TFLOPS, BF16/FP16 362.05 TFLOPS, "
        "TF32 183 TFLOPS (half the sparse figures)",
        aliases=("NVIDIA L40S",),
    ),
    GPU(
        product="RTX 4090",
        vendor="NVIDIA",
        architecture="sm_89",
        memory_bandwidth=1008e9,
        peak_flops=_rates(
            float8_e4m3fn=660.6, float8_e5m2=660.6, bfloat16=165.2, float16=330.3, float32=82.6, float64=1.3
        ),
        source="NVIDIA Ada Lovelace GPU architecture whitepaper (2022), appendix A, GeForce RTX 4090: 1,008 GB/s "
        "GDDR6X; dense FP8 660.6 TFLOPS and FP16 330.3 TFLOPS (FP16 accumulate), BF16 165.2 TFLOPS "
        "(FP32 accumulate), TF32 82.6 TFLOPS",
        aliases=("NVIDIA GeForce RTX 4090", "GeForce RTX 4090", "4090"),
    ),
    GPU(
        product="MI300X",
        vendor="AMD",
        architecture="gfx942",
        memory_bandwidth=5.3e12,
        peak_flops=_rates(
            float8_e4m3fn=2614.9, float8_e5m2=2614.9, bfloat16=1307.4, float16=1307.4, float32=653.7, float64=163.4
        ),
        source="AMD Instinct MI300X accelerator data sheet (2023): 5.3 TB/s HBM3; dense FP8 2,614.9 TFLOPS, "
        "FP16/BF16 1,307.4 TFLOPS, TF32 653.7 TFLOPS, FP64 matrix 163.4 TFLOPS",
        aliases=("AMD Instinct MI300X", "Instinct MI300X"),
    ),
)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


_BY_KEY: dict[str, GPU] = {}
for _gpu in GPUS:
    for _name in (_gpu.product, *_gpu.aliases):
        _BY_KEY[_key(_name)] = _gpu


def find_gpu(name: str) -> GPU | None:
    """The datasheet entry for a product name or alias, ignoring case, spaces and punctuation."""
    return _BY_KEY.get(_key(name))


def normalize_product(name: str) -> str:
    """The index's product name for what a driver or source calls the GPU.

    ``"NVIDIA H200"`` becomes ``"H200"``; names not in the table lose a leading
    vendor word and are otherwise kept as given.
    """
    known = find_gpu(name)
    if known is not None:
        return known.product
    return re.sub(r"^(NVIDIA|AMD|Intel)\s+", "", name.strip())


def products() -> list[str]:
    return [gpu.product for gpu in GPUS]
