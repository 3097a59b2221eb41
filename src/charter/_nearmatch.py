"""Suggestions for an unknown tool name, drawn only from the names the caller may see.

The distance is Damerau-Levenshtein in its optimal string alignment form (an adjacent
transposition costs 1), capped at the tolerance so a long or hostile name costs little.
The tolerance grows with the unknown name's length: up to 4 characters 1 edit, up to 8
characters 2 edits, longer 3. Comparison is case-sensitive, like tool names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ("NearMatches", "near_matches", "suggestion_text")

_NO_MATCH_HINT = (
    "No tool has a similar name. List the tools available to you with the discovery call "
    "and retry with one of those names."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class NearMatches:
    """The known names close to an unknown one, nearest first."""

    candidates: tuple[str, ...] = ()
    """Names within the tolerance, sorted by (distance, name), never the unknown name itself."""

    did_you_mean: str | None = None
    """The nearest name, set only when it is strictly closer than every other candidate."""


def near_matches(name: str, candidates: Iterable[str], *, limit: int = 5) -> NearMatches:
    """Find the candidate names within edit tolerance of an unknown name.

    Args:
        name: The unknown name the caller sent.
        candidates: The names the caller may see (never hidden tools); duplicates are ignored.
        limit: The most candidates to return.

    Returns:
        The close candidates and, if one is unambiguously nearest, that one.

    Raises:
        ValueError: ``limit`` is less than 1.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    tolerance = _tolerance(name)
    scored = sorted(
        (distance, candidate)
        for candidate in set(candidates)
        if candidate != name
        and (distance := _osa_distance(name, candidate, tolerance)) <= tolerance
    )
    if not scored:
        return NearMatches()
    nearest_distance, nearest = scored[0]
    unambiguous = len(scored) == 1 or nearest_distance < scored[1][0]
    return NearMatches(
        candidates=tuple(candidate for _, candidate in scored[:limit]),
        did_you_mean=nearest if unambiguous else None,
    )


def suggestion_text(matches: NearMatches) -> str:
    """Render near matches as one sentence for an error message; never lists every tool."""
    if matches.did_you_mean is not None:
        return f'Did you mean "{matches.did_you_mean}"?'
    if matches.candidates:
        return f"Close matches: {', '.join(matches.candidates)}."
    return _NO_MATCH_HINT


def _tolerance(name: str) -> int:
    """Return how many edits a suggestion for ``name`` may be away."""
    if len(name) <= 4:
        return 1
    if len(name) <= 8:
        return 2
    return 3


def _osa_distance(source: str, target: str, cap: int) -> int:
    """Return the optimal string alignment distance, or ``cap + 1`` once it exceeds ``cap``.

    Only cells within ``cap`` of the diagonal can stay within the cap, so each row computes
    just that band, and the scan stops at the first row whose cells all exceed the cap.
    """
    if abs(len(source) - len(target)) > cap:
        return cap + 1
    over = cap + 1
    width = len(target)
    before: list[int] = []  # row i - 2, for transpositions
    previous = [min(column, over) for column in range(width + 1)]
    for row in range(1, len(source) + 1):
        current = [over] * (width + 1)
        current[0] = min(row, over)
        char = source[row - 1]
        for column in range(max(1, row - cap), min(width, row + cap) + 1):
            other = target[column - 1]
            cost = previous[column - 1] + (char != other)
            best = min(previous[column] + 1, current[column - 1] + 1, cost)
            if row > 1 and column > 1 and char == target[column - 2] and source[row - 2] == other:
                best = min(best, before[column - 2] + 1)
            current[column] = min(best, over)
        if min(current) > cap:
            return over
        before, previous = previous, current
    return previous[width]
