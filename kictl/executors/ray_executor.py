"""``RayExecutor``: the same jobs as long-lived Ray actors (``--executor ray``, the ``kictl[cluster]`` extra).

Each actor holds one device for its whole life (``num_gpus=1`` on CUDA, so
Ray gives it one GPU through ``CUDA_VISIBLE_DEVICES`` and it uses
``cuda:0``; ``num_cpus=1`` on the CPU), so JIT caches stay warm across jobs.
Jobs are routed to a GPU product with Ray's ``accelerator_type`` (the node
resource ``accelerator_type:H200``) or any custom resources
(``{"kictl-h200": 1}``) a cluster's nodes advertise.  Each actor runs the
same step as a local worker (``kictl.executors.worker.handle``): the same
bench worker, timer and checks.  Messages are JSON text both ways; results
stream back to the driver as each finishes (``ray.wait``), where they are
checked, written and (for reruns) signed: worker nodes never hold a key.

``address=None`` joins the Ray instance this process already started, else
starts a local one (and shuts it down on ``close``); any other address is
passed to ``ray.init(address=...)`` (``auto``, ``ray://head:10001``).  Every
node needs the same kictl installed (``pip install 'kictl[cluster]'``).

Ray stays quiet unless ``kictl --verbose`` (``KICTL_VERBOSE=1``): its own
INFO and WARNING lines and the actors' output are not forwarded to the
driver (``ray_init_options``).  A local instance kictl starts keeps its
session files in a temporary folder of its own, and its authentication token
in the environment of this process (a fresh random one) rather than in
``~/.ray/auth_token``: kictl writes nothing in the user's home that it was not
asked for.  A user's own ``RAY_AUTH_MODE``/``RAY_AUTH_TOKEN``/
``RAY_AUTH_TOKEN_PATH`` are left as they are.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
from typing import Any

from kictl import canon
from kictl.errors import EnvError, KictlError, UsageError
from kictl.executors.base import Executor, WorkerEvent
from kictl.executors.jobs import Job
from kictl.executors.worker import handle, ready

#: Seconds an actor may take to be placed, open its device and report.
STARTUP_TIMEOUT_S = 300.0


def import_ray() -> Any:
    """The ``ray`` module; raises ``EnvError`` when the cluster extra is not installed."""
    try:
        import ray  # an optional dependency (the ``cluster`` extra)
    except ImportError as exc:
        raise EnvError("--executor ray needs Ray: pip install 'kictl[cluster]'") from exc
    return ray


def verbose() -> bool:
    """Whether ``kictl --verbose`` (or ``KICTL_VERBOSE=1``) asked tools such as Ray to speak."""
    return os.environ.get("KICTL_VERBOSE", "") not in ("", "0")


def ray_init_options(*, starting: bool) -> dict[str, Any]:
    """Keywords for ``ray.init``: quiet unless ``verbose()``; a local instance's files in a temporary folder.

    ``starting``: kictl starts the local instance (not joining a cluster), so
    it chooses where the instance's session files go.
    """
    loud = verbose()
    options: dict[str, Any] = {"log_to_driver": loud, "logging_level": logging.INFO if loud else logging.ERROR}
    if starting:
        options["_temp_dir"] = tempfile.mkdtemp(prefix="kictl-ray-")
    return options


def keep_token_out_of_home() -> None:
    """Give a local instance a fresh token in this process's environment (Ray would write ``~/.ray/auth_token``)."""
    if any(name in os.environ for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return  # the user's choice stands
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


class _KictlActor:
    """One device on a Ray node; its methods answer JSON text."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.hello = ready(device)
        try:
            ray = import_ray()
            self.hello["node"] = ray.get_runtime_context().get_node_id()
        except Exception:  # the node id is only for display
            pass

    def ready(self) -> str:
        return json.dumps(self.hello, allow_nan=False)

    def run(self, payload: str) -> str:
        return json.dumps(handle(payload, self.device), allow_nan=False)


class RayExecutor(Executor):
    """Long-lived Ray actors, one per device, on an existing cluster (``address``) or a local one."""

    def __init__(
        self,
        address: str | None = None,
        *,
        device_kind: str = "cuda",
        workers: int | None = None,
        accelerator_type: str | None = None,
        resources: dict[str, float] | None = None,
        init_options: dict[str, Any] | None = None,
    ) -> None:
        if device_kind not in ("cpu", "cuda"):
            raise UsageError(f"device kind {device_kind!r}: expected cpu or cuda")
        if device_kind == "cpu" and accelerator_type is not None:
            raise UsageError("an accelerator type routes GPU jobs; CPU jobs take custom resources")
        if workers is not None and workers < 1:
            raise UsageError("a Ray executor needs at least one worker")
        self.address = address
        self.device_kind = device_kind
        super().__init__()
        self.workers = workers
        self.accelerator_type = accelerator_type
        self.resources = dict(resources or {})
        self.init_options = dict(init_options or {})
        self._ray: Any = None
        self._started_ray = False
        self._temp_dir: str | None = None  # a local instance's session files (removed on close unless verbose)
        self._actors: dict[str, Any] = {}
        self._inflight: dict[Any, str] = {}
        self.nodes: dict[str, str] = {}

    def _connect(self) -> Any:
        if self.address is None and "ray" not in sys.modules:
            keep_token_out_of_home()  # before Ray reads its configuration
        ray = import_ray()
        try:
            if self.address is not None:
                ray.init(address=self.address, **{**ray_init_options(starting=False), **self.init_options})
                self._started_ray = True
            elif not ray.is_initialized():
                options = {**ray_init_options(starting=True), **self.init_options}
                self._temp_dir = options.get("_temp_dir")
                ray.init(include_dashboard=False, **options)
                self._started_ray = True
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EnvError(f"cannot reach a Ray cluster at {self.address or 'a new local instance'}: {exc}") from exc
        return ray

    def _count(self, ray: Any) -> int:
        if self.workers is not None:
            return self.workers
        count = sum(self.capacity(node.get("Resources", {})) for node in ray.nodes() if node.get("Alive"))
        if count < 1:
            wanted = "GPU" if self.device_kind == "cuda" else "CPU"
            if self.accelerator_type is not None:
                wanted += f" of type {self.accelerator_type}"
            raise EnvError(f"the Ray cluster has no {wanted} to run on")
        return count

    def capacity(self, resources: dict[str, float]) -> int:
        """How many of this executor's actors a node with ``resources`` can hold."""
        count = int(resources.get("GPU" if self.device_kind == "cuda" else "CPU", 0))
        if self.accelerator_type is not None and not resources.get(f"accelerator_type:{self.accelerator_type}"):
            return 0
        for name, amount in self.resources.items():
            if amount > 0:
                count = min(count, int(resources.get(name, 0) // amount))
        return count

    def actor_options(self) -> dict[str, Any]:
        """What each actor asks Ray for: one GPU (of a product) or one CPU, and no restarts."""
        options: dict[str, Any] = {"max_restarts": 0, "max_task_retries": 0}
        if self.device_kind == "cuda":
            options["num_gpus"] = 1
            options["num_cpus"] = 1
            if self.accelerator_type is not None:
                options["accelerator_type"] = self.accelerator_type
        else:
            options["num_cpus"] = 1
            options["num_gpus"] = 0
        if self.resources:
            options["resources"] = dict(self.resources)
        return options

    def start(self) -> None:
        ray = self._ray = self._connect()
        count = self._count(ray)
        actor_class = ray.remote(_KictlActor).options(**self.actor_options())
        device = "cuda:0" if self.device_kind == "cuda" else "cpu"
        hellos = {}
        for number in range(count):
            slot = f"ray#{number}"
            self._actors[slot] = actor_class.remote(device)
            hellos[self._actors[slot].ready.remote()] = slot
        done, waiting = ray.wait(list(hellos), num_returns=len(hellos), timeout=STARTUP_TIMEOUT_S)
        for ref in waiting:
            slot = hellos[ref]
            self.failed_at_start[slot] = f"not placed or not ready in {STARTUP_TIMEOUT_S:.0f} s"
            ray.kill(self._actors.pop(slot))
        for ref in done:
            slot = hellos[ref]
            try:
                message = canon.parse_json(ray.get(ref))
            except (KictlError, ray.exceptions.RayError) as exc:
                message = {"type": "device_error", "detail": str(exc)}
            if self._started(slot, message, "the actor did not start"):
                self.nodes[slot] = str(message.get("node", ""))
            else:
                ray.kill(self._actors.pop(slot))
        self._require_a_worker("Ray worker")

    def submit(self, slot: str, job: Job, payload: str) -> None:
        self._inflight[self._actors[slot].run.remote(payload)] = slot

    def next_event(self) -> WorkerEvent:
        ray = self._ray
        done, _ = ray.wait(list(self._inflight), num_returns=1)
        slot = self._inflight.pop(done[0])
        try:
            message = canon.parse_json(ray.get(done[0]))
        except ray.exceptions.RayError as exc:  # the actor or its node died
            message = {"type": "device_error", "detail": f"{type(exc).__name__}: {str(exc).strip()[:500]}"}
        except KictlError as exc:
            message = {"type": "device_error", "detail": f"unreadable message from the actor: {exc}"}
        if not isinstance(message, dict):
            message = {"type": "device_error", "detail": "the actor sent something that is no message"}
        if message.get("type") == "result" and isinstance(message.get("records"), list):
            return WorkerEvent(slot, "result", records=tuple(message["records"]))
        if message.get("type") == "job_error":
            return WorkerEvent(slot, "job_error", detail=str(message.get("detail", "")))
        self._environments.pop(slot, None)
        actor = self._actors.pop(slot, None)
        if actor is not None:
            ray.kill(actor)
        return WorkerEvent(slot, "device_error", detail=str(message.get("detail", "the actor failed")))

    def close(self) -> None:
        ray = self._ray
        if ray is None:
            return
        for actor in self._actors.values():
            ray.kill(actor)
        self._actors.clear()
        self._environments.clear()
        self._inflight.clear()
        if self._started_ray:
            ray.shutdown()
        if self._temp_dir is not None and not verbose():
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        self._ray = None


__all__ = ["RayExecutor", "import_ray"]
