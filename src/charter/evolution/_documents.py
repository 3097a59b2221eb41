"""Manifest documents read, and lock files written: the inputs of a comparison.

A manifest is the list of entries `Registry.manifest()` returns (docs/manifest-format.md),
a discovery document `{"tools": [...]}`, or a lock file written by `charter lock`
(`{"lockVersion": 1, "tools": [...]}`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence

from charter.errors import ConfigurationError
from charter.evolution._entries import entry_problem

__all__ = ("LOCK_VERSION", "ManifestError", "lock_json", "parse_manifest", "read_manifest")

LOCK_VERSION = 1
"""The version of the lock file format `lock_json` writes."""


class ManifestError(ConfigurationError):
    """Raised when a manifest or lock file cannot be read or does not hold tool entries.

    The message names the source and what is wrong with it.
    """


def parse_manifest(document: object, *, source: str = "manifest") -> list[dict[str, object]]:
    """Return the tool entries of a manifest document.

    Accepts a list of entries, a discovery document `{"tools": [...]}`, or a lock file
    `{"lockVersion": 1, "tools": [...]}`.

    Raises:
        ManifestError: The document holds no list of named entries, names a tool twice,
            has an entry no registry would write (a field of the wrong type, nesting deeper
            than `MAX_DEPTH`), or is a lock file of another version.
    """
    if isinstance(document, Mapping):
        version = document.get("lockVersion", LOCK_VERSION)
        if version != LOCK_VERSION:
            raise ManifestError(
                f"{source}: lockVersion {version!r} is not supported (expected {LOCK_VERSION}); "
                "regenerate it with `charter lock`"
            )
        document = document.get("tools")
    if not isinstance(document, list):
        raise ManifestError(
            f"{source}: expected a list of tool entries or an object with a 'tools' list"
        )
    seen: set[str] = set()
    entries: list[dict[str, object]] = []
    for index, entry in enumerate(document):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ManifestError(f"{source}: entry {index} is not an object with a string 'name'")
        name = str(entry["name"])
        if (problem := entry_problem(entry)) is not None:
            raise ManifestError(f"{source}: tool {name!r}: {problem}")
        if name in seen:
            raise ManifestError(f"{source}: tool {name!r} appears twice")
        seen.add(name)
        entries.append(dict(entry))
    return entries


def read_manifest(path: str | os.PathLike[str]) -> list[dict[str, object]]:
    """Read the tool entries of a manifest or lock file.

    Raises:
        ManifestError: The file cannot be read, is not JSON, nests too deeply, or holds no
            valid tool entries.
    """
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except OSError as exc:
        raise ManifestError(f"cannot read {os.fspath(path)}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise ManifestError(f"{os.fspath(path)} is not valid JSON: {exc}") from exc
    except RecursionError:
        # The parser recurses per level; the message must not be a traceback (exit 1).
        raise ManifestError(f"{os.fspath(path)} nests too deeply to read") from None
    return parse_manifest(document, source=os.fspath(path))


def lock_json(entries: Sequence[Mapping[str, object]]) -> str:
    """The lock file for a manifest: stable JSON, sorted keys, two-space indent."""
    document = {"lockVersion": LOCK_VERSION, "tools": list(entries)}
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"
