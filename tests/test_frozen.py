"""The one-call field setting of per-call records (``charter._frozen``) behaves as a dataclass's.

``CallOptions`` and ``PreparedAction`` write their own ``__init__``; these tests pin what
that relies on (fields in the instance ``__dict__``, read back by the dataclass machinery)
and that the hand-written parameters stay the dataclass's fields.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from charter._frozen import set_fields
from charter.host import CallOptions
from charter.registry import PreparedAction


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Generated:
    name: str
    count: int = 0


@dataclasses.dataclass(frozen=True, kw_only=True, init=False)
class _OneCall:
    name: str
    count: int = 0

    def __init__(self, *, name: str, count: int = 0) -> None:
        set_fields(self, {"name": name, "count": count})


def test_a_record_set_in_one_call_compares_hashes_replaces_and_pickles_as_a_dataclass() -> None:
    record = _OneCall(name="trip", count=2)
    assert record == _OneCall(name="trip", count=2)
    assert record != _OneCall(name="trip", count=3)
    assert hash(record) == hash(_OneCall(name="trip", count=2))
    assert repr(record) == repr(_Generated(name="trip", count=2)).replace("_Generated", "_OneCall")
    assert dataclasses.replace(record, count=5) == _OneCall(name="trip", count=5)
    assert dataclasses.asdict(record) == {"name": "trip", "count": 2}
    assert pickle.loads(pickle.dumps(record)) == record


def test_a_record_set_in_one_call_still_refuses_changes() -> None:
    record = _OneCall(name="trip")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.count = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del record.name


@pytest.mark.parametrize("record_type", [CallOptions, PreparedAction])
def test_the_hand_written_init_takes_exactly_the_dataclass_fields(record_type: type) -> None:
    parameters = inspect.signature(record_type).parameters
    fields = dataclasses.fields(record_type)
    assert list(parameters) == [field.name for field in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    for field in fields:
        if field.default is not dataclasses.MISSING:
            assert parameters[field.name].default == field.default, field.name
        elif field.default_factory is dataclasses.MISSING:
            assert parameters[field.name].default is inspect.Parameter.empty, field.name


def test_call_options_built_without_arguments_holds_every_default() -> None:
    options = CallOptions()
    assert dataclasses.asdict(options) == {
        field.name: field.default for field in dataclasses.fields(CallOptions)
    }
