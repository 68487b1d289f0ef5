"""Rerun requests bind results to the job the signer asked for: real Ed25519 keys, every rule attacked.

Fast: no bench session.  The end-to-end refusals of ``kictl attest rerun`` are in ``test_binding.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from kictl import trust
from kictl.errors import CheckFailed, UsageError
from kictl.records import format_timestamp
from kictl.rerun.request import (
    RerunRequest,
    check_binding,
    check_request,
    check_time,
    expected_secrets,
    make_request,
    read_request,
    write_request,
)

RUN = "sha256:" + "ab" * 32
OTHER = "sha256:" + "cd" * 32
NOW = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def request_(key: Ed25519PrivateKey) -> RerunRequest:
    return make_request([RUN], key, trust.keyid_of(key.public_key()), now=NOW)


def bind(request: RerunRequest, key: Ed25519PrivateKey, **change: str | None) -> None:
    values: dict[str, str | None] = {
        "original": RUN,
        "original_secret": "11" * 16,
        "rerun_secret": request.input_secret,
        "seed_salt": request.seed_salt,
    }
    values.update(change)
    original = values.pop("original")
    assert original is not None
    check_binding(request.body, key, original=original, **values)


def test_the_values_a_request_gives_bind_it(request_: RerunRequest, key: Ed25519PrivateKey) -> None:
    bind(request_, key)  # the honest case passes
    assert (request_.input_secret, request_.seed_salt) == expected_secrets(request_.body, key)
    again = make_request([RUN], key, trust.keyid_of(key.public_key()), now=NOW)
    assert again.body.nonce != request_.body.nonce
    assert again.input_secret != request_.input_secret  # a fresh nonce, fresh values


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"original": OTHER}, "did not ask for"),
        ({"seed_salt": None}, "states no seed salt"),
        ({"seed_salt": "0" * 32}, "seed salt is zero"),
        ({"rerun_secret": None}, "states no inputSecret"),
        ({"rerun_secret": "11" * 16}, "reuses the original run's inputSecret"),
        ({"seed_salt": "12" * 16}, "not the one the rerun request"),
        ({"rerun_secret": "12" * 16}, "inputs were not drawn for this job"),
    ],
)
def test_a_result_not_made_for_the_request_is_refused(
    request_: RerunRequest, key: Ed25519PrivateKey, change: dict[str, str | None], message: str
) -> None:
    with pytest.raises(CheckFailed, match=message):
        bind(request_, key, **change)


def test_an_edited_window_or_run_list_no_longer_gives_the_same_values(
    request_: RerunRequest, key: Ed25519PrivateKey
) -> None:
    later = request_.body.model_copy(update={"not_after": format_timestamp(NOW + timedelta(days=400))})
    widened = request_.model_copy(update={"body": later})
    with pytest.raises(CheckFailed, match="not the one"):
        bind(widened, key)
    more = request_.model_copy(update={"body": request_.body.model_copy(update={"runs": (RUN, OTHER)})})
    with pytest.raises(CheckFailed, match="not the one"):
        bind(more, key)


def test_only_the_requesting_key_can_check_or_recompute(request_: RerunRequest) -> None:
    other = Ed25519PrivateKey.generate()
    with pytest.raises(CheckFailed, match="made by key"):
        check_request(request_.body, trust.keyid_of(other.public_key()), now=NOW)
    assert expected_secrets(request_.body, other) != (request_.input_secret, request_.seed_salt)


def test_times_outside_the_window_or_in_the_future_are_refused(request_: RerunRequest) -> None:
    body = request_.body
    check_time("observed", format_timestamp(NOW + timedelta(hours=1)), body, now=NOW + timedelta(hours=2))
    with pytest.raises(CheckFailed, match="in the future"):
        check_time("observed", "2099-01-01T00:00:00.000Z", body, now=NOW + timedelta(hours=2))
    with pytest.raises(CheckFailed, match="outside the job's window"):
        check_time("observed", format_timestamp(NOW - timedelta(days=1)), body, now=NOW + timedelta(hours=2))
    with pytest.raises(CheckFailed, match="outside the job's window"):
        check_time("observed", format_timestamp(NOW + timedelta(hours=7)), body, now=NOW + timedelta(days=1))
    with pytest.raises(CheckFailed, match="in the future"):
        check_request(body, body.keyid, now=NOW - timedelta(hours=1))


def test_a_request_round_trips_and_refuses_nonsense(request_: RerunRequest, tmp_path: Path) -> None:
    path = tmp_path / "request.json"
    write_request(path, request_)
    assert read_request(path) == request_
    with pytest.raises(UsageError, match="no rerun request"):
        read_request(tmp_path / "absent.json")
    with pytest.raises(UsageError, match="at least one run"):
        make_request([], Ed25519PrivateKey.generate(), "ab" * 32)
