"""PyTorch implementation of gemm_n4096_k4096: ``torch.matmul`` on the float16 operands.

C = A @ B.T in one library call (cuBLAS on a GPU, float32 accumulation),
with B's transpose taken as a view, so no copy of the weight is made.
"""

import torch

N = 4096
K = 4096


@torch.no_grad()
def run(A, B):
    return torch.matmul(A, B.t())
