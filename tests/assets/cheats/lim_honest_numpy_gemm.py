"""Fair: a GEMM through numpy, whose BLAS (OpenBLAS) keeps a thread pool that spins after each call when it
is as large as the machine (must pass: the harness sizes every library's pool to the CPUs the worker was given
and lets idle threads sleep, before anything is imported; ``sandbox.THREAD_VARIABLES``).  Nothing here sets a
thread count.
"""

import numpy as np
import torch


@torch.no_grad()
def run(A, B):
    a = A.numpy().astype(np.float32)
    b = B.numpy().astype(np.float32)
    return torch.from_numpy(a @ b.T).to(torch.float16)
