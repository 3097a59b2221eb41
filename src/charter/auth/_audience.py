"""Audiences: which actor types may see a tool, and which audience pools an actor may query."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ("audience_allows", "enforce_audience")


def _audiences(allowed: Sequence[str] | None) -> Sequence[str]:
    if allowed is None:
        return ()
    if isinstance(allowed, str):
        # A str is a Sequence[str]: "staff" would otherwise allow "s", "t", "a", "f".
        raise TypeError(f"allowed audiences must be a list of audiences, not {allowed!r}")
    return allowed


def audience_allows(allowed: Sequence[str] | None, audience: str) -> bool:
    """Tell whether a tool with an audience list is visible to a caller's audience.

    Args:
        allowed: The tool's allowed audiences; None or empty means every audience.
        audience: The caller's audience (``Principal.actor``).

    Returns:
        True when ``allowed`` is None or empty, or contains ``audience``.

    Raises:
        TypeError: If ``allowed`` is a single string.
    """
    audiences = _audiences(allowed)
    return not audiences or audience in audiences


def enforce_audience(actor: str, allowed: Sequence[str] | None) -> bool:
    """Tell whether an actor may query the given audience pools (the original's rule).

    Staff may federate across pools; any other actor may query only its own pool. This is
    for tools that take the audiences to search as input, not for tool visibility (see
    ``audience_allows``).

    Args:
        actor: The caller's actor type.
        allowed: The audiences the call asks for.

    Returns:
        True when ``allowed`` is None or empty, ``actor`` is ``staff``, or ``allowed`` is
        exactly ``[actor]``.

    Raises:
        TypeError: If ``allowed`` is a single string.
    """
    audiences = _audiences(allowed)
    if not audiences or actor == "staff":
        return True
    return len(audiences) == 1 and audiences[0] == actor
