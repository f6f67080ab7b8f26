"""What "made as validation makes it" means for a model made without validation
(``core.unvalidated``): shared by the tests of each model made that way."""

from __future__ import annotations

from pydantic import BaseModel


def assert_made_as_validated(got: BaseModel, want: BaseModel, cls: type[BaseModel]) -> None:
    """``got`` is ``want`` as ``cls``: field by field the same types and reprs (NaN, inf and
    -0.0 told apart, which ``==`` cannot), the same field order (what dumps and journals
    follow), fields set, extra and private state, and JSON."""
    assert type(got) is type(want) is cls
    for name in cls.model_fields:
        mine, theirs = getattr(got, name), getattr(want, name)
        assert type(mine) is type(theirs), name
        assert repr(mine) == repr(theirs), name
    assert list(vars(got)) == list(vars(want))
    assert got.model_fields_set == want.model_fields_set
    assert type(got.model_fields_set) is type(want.model_fields_set)
    assert got.__pydantic_extra__ == want.__pydantic_extra__
    assert got.__pydantic_private__ == want.__pydantic_private__
    assert got.model_dump_json() == want.model_dump_json()
