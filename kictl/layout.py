"""The registry's layout on disk: every path kictl knows, as pure functions (no I/O).

One place names the folders and files of a registry (see ``docs/records.md``)::

    definitions/<family>/<name>/definition.json        editable source of a Definition
    registry/records/<kind>/<hex[0:2]>/<hex>.json       every published record, immutable
    registry/attestations/<hex[0:2]>/<hex>/<envelope hex>.dsse.json
    registry/blobs/<hex[0:2]>/<hex>                     raw bytes, named by their sha256
    registry/trust/root.json                            the current trust root
    registry/trust/<N>.root.json                        every version of the trust root
    registry/policy.json                                staleness, tolerances, floor model
    registry/advisories/<KI-YYYY-NNNN>/<N>.dsse.json    harness advisories, signed (docs/advisories.md)
    .kictl/                                             derived data, never committed

Paths here are POSIX strings relative to the registry root (what git and a PR
diff name); ``store.registry.Registry`` joins them onto its root.  The ``parse_*``
functions are the inverse: they say which record, blob or envelope a path
names, or ``None`` for a path off the layout, and are what ``validate``,
``review`` and ``index`` use to read a tree they did not write.
"""

from __future__ import annotations

#: The kinds of record, each with its folder under ``registry/records/`` (``kictl.records`` models them).
KINDS = (
    "Definition",
    "Workload",
    "Implementation",
    "BenchmarkProtocol",
    "ExecutionEnvironment",
    "BenchmarkRun",
)

REGISTRY_DIR = "registry"
DEFINITIONS_DIR = "definitions"
KICTL_DIR = ".kictl"
RECORDS_DIR = f"{REGISTRY_DIR}/records"
ATTESTATIONS_DIR = f"{REGISTRY_DIR}/attestations"
BLOBS_DIR = f"{REGISTRY_DIR}/blobs"
TRUST_DIR = f"{REGISTRY_DIR}/trust"
#: harness advisories: ``<ID>/<version>.dsse.json`` (docs/advisories.md)
ADVISORIES_DIR = f"{REGISTRY_DIR}/advisories"
POLICY_FILE = f"{REGISTRY_DIR}/policy.json"
ROOT_FILE = f"{TRUST_DIR}/root.json"
ENVELOPE_SUFFIX = ".dsse.json"
ROOT_VERSION_SUFFIX = ".root.json"
DIGEST_PREFIX = "sha256:"

#: How each kind of path looks, for messages that reject a path off the layout.
RECORD_PATTERN = f"{RECORDS_DIR}/<kind>/<hex[0:2]>/<hex>.json"
BLOB_PATTERN = f"{BLOBS_DIR}/<hex[0:2]>/<hex>"
ATTESTATION_PATTERN = f"{ATTESTATIONS_DIR}/<hex[0:2]>/<record hex>/<hex>{ENVELOPE_SUFFIX}"
ROOT_VERSION_PATTERN = f"{TRUST_DIR}/<N>{ROOT_VERSION_SUFFIX}"

_HEX = frozenset("0123456789abcdef")
_RECORDS_PARTS = tuple(RECORDS_DIR.split("/"))
_BLOBS_PARTS = tuple(BLOBS_DIR.split("/"))
_ATTESTATIONS_PARTS = tuple(ATTESTATIONS_DIR.split("/"))


def is_hex64(text: str) -> bool:
    """Whether ``text`` is 64 lowercase hex digits (the name of a record, blob or envelope)."""
    return len(text) == 64 and _HEX.issuperset(text)


def _hex(digest: str) -> str:
    """The hex of ``sha256:<hex>`` (or of bare hex), unchecked beyond its shape."""
    return digest[len(DIGEST_PREFIX) :] if digest.startswith(DIGEST_PREFIX) else digest


# --------------------------------------------------------------------------- building paths


def record_path(kind: str, digest: str) -> str:
    """``registry/records/<kind>/<hex[0:2]>/<hex>.json`` of a record."""
    hex_digest = _hex(digest)
    return f"{RECORDS_DIR}/{kind}/{hex_digest[:2]}/{hex_digest}.json"


def record_shard(kind: str, hex_prefix: str) -> str:
    """The folder that holds the records of ``kind`` whose hex starts with ``hex_prefix`` (2+ digits)."""
    return f"{RECORDS_DIR}/{kind}/{hex_prefix[:2]}"


def blob_path(digest: str) -> str:
    """``registry/blobs/<hex[0:2]>/<hex>`` of a blob."""
    hex_digest = _hex(digest)
    return f"{BLOBS_DIR}/{hex_digest[:2]}/{hex_digest}"


def attestation_folder(digest: str) -> str:
    """``registry/attestations/<hex[0:2]>/<hex>``: the envelopes about one record."""
    hex_digest = _hex(digest)
    return f"{ATTESTATIONS_DIR}/{hex_digest[:2]}/{hex_digest}"


def envelope_file_name(envelope_hex: str) -> str:
    """``<sha256 of the envelope's JCS bytes>.dsse.json``."""
    return f"{envelope_hex}{ENVELOPE_SUFFIX}"


def attestation_path(digest: str, envelope_hex: str) -> str:
    """The file of one envelope about record ``digest``."""
    return f"{attestation_folder(digest)}/{envelope_file_name(envelope_hex)}"


def root_version_path(version: int) -> str:
    """``registry/trust/<N>.root.json``: version ``N`` of the trust root."""
    return f"{TRUST_DIR}/{version}{ROOT_VERSION_SUFFIX}"


# --------------------------------------------------------------------------- reading paths


def parse_record_path(path: str) -> tuple[str, str] | None:
    """``(kind, digest)`` a path on the record layout names, else ``None``."""
    parts = path.split("/")
    if len(parts) != 5 or (parts[0], parts[1]) != _RECORDS_PARTS or parts[2] not in KINDS:
        return None
    name = parts[4]
    if not name.endswith(".json") or not is_hex64(name[:-5]) or parts[3] != name[:2]:
        return None
    return parts[2], DIGEST_PREFIX + name[:-5]


def parse_blob_path(path: str) -> str | None:
    """The digest a path on the blob layout names, else ``None``."""
    parts = path.split("/")
    if len(parts) != 4 or (parts[0], parts[1]) != _BLOBS_PARTS:
        return None
    if not is_hex64(parts[3]) or parts[2] != parts[3][:2]:
        return None
    return DIGEST_PREFIX + parts[3]


def parse_attestation_path(path: str) -> tuple[str, str] | None:
    """``(record digest, envelope file name)`` of a path on the attestation layout, else ``None``.

    The envelope's own name is returned unchecked (``validate`` judges it
    against the envelope's bytes).
    """
    parts = path.split("/")
    if len(parts) != 5 or (parts[0], parts[1]) != _ATTESTATIONS_PARTS:
        return None
    if not is_hex64(parts[3]) or parts[2] != parts[3][:2] or not parts[4].endswith(ENVELOPE_SUFFIX):
        return None
    return DIGEST_PREFIX + parts[3], parts[4]


def parse_root_version_path(path: str) -> int | None:
    """``N`` of ``registry/trust/<N>.root.json``, else ``None``."""
    folder, _, name = path.rpartition("/")
    number = name.removesuffix(ROOT_VERSION_SUFFIX)
    if folder != TRUST_DIR or number == name or not (number.isascii() and number.isdigit()) or number[0] == "0":
        return None
    return int(number)


def area(path: str) -> str:
    """Which part of the registry a path belongs to.

    One of ``record``, ``blob``, ``attestation``, ``root`` (the current trust
    root), ``trust`` (the rest of ``registry/trust/``), ``policy``, ``advisory``,
    ``registry-other``, ``definition`` and ``outside``.
    """
    if path.startswith(f"{RECORDS_DIR}/"):
        return "record"
    if path.startswith(f"{BLOBS_DIR}/"):
        return "blob"
    if path.startswith(f"{ATTESTATIONS_DIR}/"):
        return "attestation"
    if path == ROOT_FILE:
        return "root"
    if path.startswith(f"{TRUST_DIR}/"):
        return "trust"
    if path == POLICY_FILE:
        return "policy"
    if path.startswith(f"{ADVISORIES_DIR}/"):
        return "advisory"
    if path.startswith(f"{REGISTRY_DIR}/"):
        return "registry-other"
    if path.startswith(f"{DEFINITIONS_DIR}/"):
        return "definition"
    return "outside"
