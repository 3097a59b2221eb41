"""A test helper that fails when the live tools break the contract in a lock file."""

from __future__ import annotations

import datetime
import os

from charter._target import manifest_of
from charter.evolution import ManifestError, diff_manifests, format_report, read_manifest

__all__ = ("assert_compatible_with_lock",)


def assert_compatible_with_lock(
    registry_or_host: object,
    lock_path: str | os.PathLike[str],
    *,
    today: datetime.date | None = None,
) -> None:
    """Fail when the live tools break the contract recorded in a lock file.

    The lock file (written by `charter lock`) is the old manifest, the registry's live
    manifest the new one. A breaking change passes only behind a major `capabilityVersion`
    bump or a new name that keeps the old one as a deprecated alias.

    Args:
        registry_or_host: A `charter.Registry`, or a `Host` (its `.registry` is used).
        lock_path: The lock file, usually `charter.lock.json` at the project root.
        today: The date sunset dates are compared with; defaults to today.

    Raises:
        AssertionError: The lock file is missing or unreadable, or a breaking change is
            not versioned; the message is the full report.
    """
    if not os.path.exists(lock_path):
        raise AssertionError(
            f"no lock file at {os.fspath(lock_path)}; run `charter lock module:attribute` "
            "to record the current tool contract, and commit it"
        )
    try:
        locked = read_manifest(lock_path)
    except ManifestError as exc:
        raise AssertionError(f"{exc}; regenerate it with `charter lock module:attribute`") from exc
    diff = diff_manifests(locked, manifest_of(registry_or_host), today=today)
    if diff.unversioned_breaking():
        raise AssertionError(
            f"tools changed incompatibly since {os.fspath(lock_path)}:\n{format_report(diff)}"
        )
