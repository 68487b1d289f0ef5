"""What a job is and what travels to a worker: ``BenchSettings``, ``Job`` and ``JobPayload`` (DESIGN §12).

Plain data, kept apart from planning (``kictl.executors.jobs``) and from what
runs a job (``kictl.executors.seam``), so that both import these types and
neither imports the other to name them.  ``kictl.executors.jobs`` re-exports
every name here.
"""

from __future__ import annotations

import base64
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kictl import canon
from kictl.errors import RecordError
from kictl.records import StoredRecord, record_from_value

DigestStr = Field(pattern=r"^sha256:[0-9a-f]{64}$")


#: A bench option's value, as JSON.
OptionValue = bool | int | float | str | None


class BenchSettings(BaseModel):
    """The protocol settings of a bench, as they decide a job's identity.

    ``options`` holds every field of the bench's options except the device
    and the workload selection (``None`` counts take the device kind's
    defaults, as ``kictl bench`` does), so an option the bench gains becomes
    part of every job's identity with no change here.  The device itself is
    not a setting, only its kind: the same job may run on any GPU of a pool,
    and the environment it ran in is a record of its own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    device_kind: Literal["cpu", "cuda"]
    options: dict[str, OptionValue] = Field(default_factory=dict)

    @property
    def digest(self) -> str:
        """``sha256:`` of the JCS of the settings (RFC 8785)."""
        return canon.bytes_digest(canon.canonical_bytes(self.model_dump(mode="json")))

    def changed(self, **values: OptionValue) -> BenchSettings:
        """These settings with some options changed."""
        return BenchSettings(device_kind=self.device_kind, options={**self.options, **values})


class Job(BaseModel):
    """One implementation on one workload of a definition, under settings; named by digests only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    definition_digest: str = DigestStr
    workload_digest: str = DigestStr
    implementation_digest: str = DigestStr
    settings_digest: str = DigestStr

    @property
    def job_id(self) -> str:
        """``sha256:`` of the JCS of the four digests: the same work has the same id on every machine."""
        body = {
            "definitionDigest": self.definition_digest,
            "workloadDigest": self.workload_digest,
            "implementationDigest": self.implementation_digest,
            "settingsDigest": self.settings_digest,
        }
        return canon.bytes_digest(canon.canonical_bytes(body))


class JobPayload(BaseModel):
    """A job and the records it runs, as JSON data (no code crosses the wire, no key either)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job: Job
    settings: BenchSettings
    definition: dict[str, Any]
    workload: dict[str, Any]
    implementation: dict[str, Any]
    #: blob digest -> standard base64 of its bytes
    blobs: dict[str, str] = Field(default_factory=dict)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> JobPayload:
        """Raises ``RecordError`` for a payload that is not one."""
        try:
            return cls.model_validate_json(text)
        except ValueError as exc:
            raise RecordError(f"job payload: {exc}") from exc

    def checked_records(self) -> tuple[StoredRecord, StoredRecord, StoredRecord]:
        """(definition, workload, implementation), validated, each checked against the job's digest.

        Raises ``RecordError`` when a record does not validate or is not the one the job names.
        """
        found = []
        for raw, expected, what in (
            (self.definition, self.job.definition_digest, "definition"),
            (self.workload, self.job.workload_digest, "workload"),
            (self.implementation, self.job.implementation_digest, "implementation"),
        ):
            record = record_from_value(raw, source=f"job {what}")
            if record.digest != expected:
                raise RecordError(f"job {what}: digest {record.digest} is not the job's {expected}")
            found.append(record)
        if self.settings.digest != self.job.settings_digest:
            raise RecordError("job settings: digest does not match the job's")
        return found[0], found[1], found[2]

    def checked_blobs(self) -> dict[str, bytes]:
        """Blob digest -> bytes; raises ``RecordError`` when bytes do not match their digest."""
        blobs = {}
        for digest, text in self.blobs.items():
            data = base64.b64decode(text, validate=True)
            if canon.bytes_digest(data) != digest:
                raise RecordError(f"job blob {digest}: bytes do not match the digest")
            blobs[digest] = data
        return blobs
