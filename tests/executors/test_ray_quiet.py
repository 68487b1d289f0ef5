"""Ray stays quiet unless --verbose, and a local instance writes nothing in the user's home (issue 30)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kictl.executors.ray_executor import keep_token_out_of_home, ray_init_options


def test_ray_init_options_are_quiet_unless_verbose(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KICTL_VERBOSE", raising=False)
    joining = ray_init_options(starting=False)
    assert joining == {"log_to_driver": False, "logging_level": logging.ERROR}
    starting = ray_init_options(starting=True)
    folder = Path(starting["_temp_dir"])
    assert folder.is_dir()
    assert folder.name.startswith("kictl-ray-")
    assert not folder.is_relative_to(Path.home())
    folder.rmdir()
    monkeypatch.setenv("KICTL_VERBOSE", "1")
    assert ray_init_options(starting=False) == {"log_to_driver": True, "logging_level": logging.INFO}


def test_the_token_goes_to_the_environment_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    keep_token_out_of_home()
    assert os.environ["RAY_AUTH_MODE"] == "token"
    first = os.environ["RAY_AUTH_TOKEN"]
    assert len(first) == 64
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", "/somewhere/token")
    keep_token_out_of_home()
    assert "RAY_AUTH_TOKEN" not in os.environ  # the user's token file stands


_START_AND_STOP = """
from kictl.executors.ray_executor import RayExecutor
executor = RayExecutor(device_kind="cpu", workers=1, init_options={"num_cpus": 1, "num_gpus": 0})
executor._ray = executor._connect()
folder = executor._temp_dir
executor.close()
import os
print(folder, os.path.exists(folder))
"""


@pytest.mark.slow
def test_a_local_ray_started_by_kictl_is_silent_and_leaves_home_alone(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "KICTL_VERBOSE"))}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", _START_AND_STOP], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no INFO or WARNING line of Ray's
    folder, exists = done.stdout.split()
    assert Path(folder).name.startswith("kictl-ray-")
    assert exists == "False"  # the session files went with the instance
    assert list(home.iterdir()) == []  # no ~/.ray/auth_token
