from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from charter._nearmatch import NearMatches, _osa_distance, near_matches, suggestion_text


def _reference_osa(source: str, target: str) -> int:
    """Textbook optimal string alignment distance, with the full table and no cap."""
    rows, columns = len(source) + 1, len(target) + 1
    table = [[0] * columns for _ in range(rows)]
    for row in range(rows):
        table[row][0] = row
    for column in range(columns):
        table[0][column] = column
    for row in range(1, rows):
        for column in range(1, columns):
            cost = 0 if source[row - 1] == target[column - 1] else 1
            table[row][column] = min(
                table[row - 1][column] + 1,
                table[row][column - 1] + 1,
                table[row - 1][column - 1] + cost,
            )
            if (
                row > 1
                and column > 1
                and source[row - 1] == target[column - 2]
                and source[row - 2] == target[column - 1]
            ):
                table[row][column] = min(table[row][column], table[row - 2][column - 2] + 1)
    return table[-1][-1]


# --- vectors from the original system --------------------------------------------------------


def test_a_transposition_costs_one_edit() -> None:
    assert _osa_distance("get_bokoing", "get_booking", 3) == 1
    assert near_matches("get_bokoing", ["get_booking"]) == NearMatches(
        candidates=("get_booking",), did_you_mean="get_booking"
    )


def test_equally_close_names_are_listed_by_name_without_a_guess() -> None:
    assert near_matches("xat", ["cat", "bat"]) == NearMatches(
        candidates=("bat", "cat"), did_you_mean=None
    )


def test_a_strictly_nearest_name_becomes_did_you_mean() -> None:
    matches = near_matches("ecoh", ["echo", "list_tools", "get_booking", "ping"])
    assert matches == NearMatches(candidates=("echo",), did_you_mean="echo")


def test_an_unrelated_name_gets_no_candidates() -> None:
    matches = near_matches("completely_unrelated_zzz", ["echo", "get_booking", "cancel_booking"])
    assert matches == NearMatches(candidates=(), did_you_mean=None)


# --- candidates ------------------------------------------------------------------------------


def test_at_most_five_candidates_are_returned_with_ties_by_name() -> None:
    matches = near_matches("tool_x", [f"tool_{letter}" for letter in "gfedcba"])
    assert matches == NearMatches(
        candidates=("tool_a", "tool_b", "tool_c", "tool_d", "tool_e"), did_you_mean=None
    )


def test_candidates_are_ordered_by_distance_before_name() -> None:
    matches = near_matches("abcdefgh", ["abcdefyz", "zbcdefgh"])
    assert matches == NearMatches(candidates=("zbcdefgh", "abcdefyz"), did_you_mean="zbcdefgh")


def test_the_limit_can_be_lowered_without_changing_the_guess() -> None:
    matches = near_matches("xat", ["cat", "bat", "hat"], limit=1)
    assert matches == NearMatches(candidates=("bat",), did_you_mean=None)


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_a_usage_error(limit: int) -> None:
    with pytest.raises(ValueError, match="limit must be at least 1"):
        near_matches("x", ["y"], limit=limit)


def test_the_exact_name_is_never_suggested() -> None:
    matches = near_matches("echo", ["echo", "echos"])
    assert matches == NearMatches(candidates=("echos",), did_you_mean="echos")
    assert near_matches("echo", ["echo"]) == NearMatches()


def test_duplicate_candidates_count_once() -> None:
    assert near_matches("ecoh", ["echo", "echo"]) == NearMatches(
        candidates=("echo",), did_you_mean="echo"
    )


def test_candidates_may_be_any_iterable() -> None:
    matches = near_matches("ecoh", (name for name in ["echo"]))
    assert matches.did_you_mean == "echo"


def test_matching_is_case_sensitive() -> None:
    assert near_matches("ECHO", ["echo"]) == NearMatches()
    assert near_matches("Echo", ["echo"]).did_you_mean == "echo"


# --- tolerance by length ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "one_more_edit_than_allowed", "as_far_as_allowed"),
    [
        ("abcd", "abxy", "abcx"),  # up to 4 characters: 1 edit
        ("abcde", "abxyz", "abcxy"),  # 5 characters: 2 edits
        ("abcdefgh", "abcdexyz", "abcdefxy"),  # 8 characters: 2 edits
        ("abcdefghi", "abcdewxyz", "abcdefxyz"),  # 9 characters: 3 edits
        ("a" * 40, "a" * 36 + "wxyz", "a" * 37 + "xyz"),  # long names: still 3
    ],
)
def test_tolerance_grows_with_the_unknown_names_length(
    name: str, one_more_edit_than_allowed: str, as_far_as_allowed: str
) -> None:
    assert near_matches(name, [as_far_as_allowed]).candidates == (as_far_as_allowed,)
    assert near_matches(name, [one_more_edit_than_allowed]).candidates == ()


def test_tolerance_follows_the_unknown_name_not_the_candidate() -> None:
    # "abcd" allows 1 edit even though the 5-character candidate alone would allow 2.
    assert near_matches("abcd", ["abcdxy"]).candidates == ()
    assert near_matches("abcdxy", ["abcd"]).candidates == ("abcd",)


def test_a_huge_unknown_name_is_cheap_and_matches_nothing() -> None:
    assert near_matches("x" * 1_000_000, ["echo", "x" * 20]) == NearMatches()


# --- the distance ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "distance"),
    [
        ("", "", 0),
        ("", "abc", 3),
        ("kitten", "sitting", 3),
        ("ca", "abc", 3),  # OSA, not unrestricted Damerau-Levenshtein (which gives 2)
        ("ab", "ba", 1),
        ("abcdef", "badcfe", 3),
    ],
)
def test_distance_is_optimal_string_alignment(source: str, target: str, distance: int) -> None:
    assert _osa_distance(source, target, 10) == distance


def test_the_distance_stops_at_the_cap() -> None:
    assert _osa_distance("aaaaaaaa", "bbbbbbbb", 3) == 4
    assert _osa_distance("a", "abcdefgh", 3) == 4


@given(
    st.text(alphabet="abcd", max_size=9),
    st.text(alphabet="abcd", max_size=9),
    st.integers(min_value=0, max_value=4),
)
def test_the_capped_distance_agrees_with_the_textbook_table(
    source: str, target: str, cap: int
) -> None:
    assert _osa_distance(source, target, cap) == min(_reference_osa(source, target), cap + 1)


@given(st.text(alphabet="abc_", min_size=1, max_size=12), st.lists(st.text("abc_", max_size=12)))
def test_suggestions_are_within_tolerance_sorted_and_capped(
    name: str, candidates: list[str]
) -> None:
    matches = near_matches(name, candidates)
    tolerance = 1 if len(name) <= 4 else 2 if len(name) <= 8 else 3
    scored = sorted(
        (_reference_osa(name, other), other)
        for other in set(candidates)
        if other != name and _reference_osa(name, other) <= tolerance
    )
    assert matches.candidates == tuple(other for _, other in scored[:5])
    unambiguous = len(scored) == 1 or (len(scored) > 1 and scored[0][0] < scored[1][0])
    assert matches.did_you_mean == (scored[0][1] if unambiguous else None)


# --- the sentence ----------------------------------------------------------------------------


def test_a_guess_is_phrased_as_a_question() -> None:
    text = suggestion_text(NearMatches(candidates=("echo",), did_you_mean="echo"))
    assert text == 'Did you mean "echo"?'


def test_ambiguous_matches_are_listed() -> None:
    assert suggestion_text(near_matches("xat", ["cat", "bat"])) == "Close matches: bat, cat."


def test_no_match_points_to_discovery_and_never_lists_the_tools() -> None:
    names = ["echo", "get_booking", "cancel_booking", "list_trips"]
    text = suggestion_text(near_matches("completely_unrelated_zzz", names))
    assert "discovery" in text
    assert not any(name in text for name in names)
