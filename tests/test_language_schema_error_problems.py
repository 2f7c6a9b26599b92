"""LanguageSchemaError carries its problems as a tuple, not only as text (issue #38)."""

from __future__ import annotations

import json
import pickle

import pytest

from steerable.errors import LanguageSchemaError
from steerable.language import Problem, raise_for_problems
from steerable.viewer.edit import _invalid


def test_raise_for_problems_sets_the_problems_and_keeps_the_message() -> None:
    found = [Problem("persistent[0]", "unknown style 'subtsk'"), Problem("events[t=0.5][0]", "matches no frame")]
    with pytest.raises(LanguageSchemaError) as caught:
        raise_for_problems(found)
    assert caught.value.problems == ("persistent[0]: unknown style 'subtsk'", "events[t=0.5][0]: matches no frame")
    assert str(caught.value) == (
        "2 problems in language rows (first: persistent[0]: unknown style 'subtsk'); fix them and retry\n"
        "  persistent[0]: unknown style 'subtsk'\n"
        "  events[t=0.5][0]: matches no frame"
    )
    assert pickle.loads(pickle.dumps(caught.value)).problems == caught.value.problems  # across processes


def test_a_one_line_error_is_its_own_problem() -> None:
    assert LanguageSchemaError("unknown language style 'x'").problems == ("unknown language style 'x'",)


def test_the_editor_replies_with_the_errors_problems_not_its_text() -> None:
    error = LanguageSchemaError(
        "1 problem in language rows (first: persistent[0]: a\nb); fix them and retry\n  persistent[0]: a\nb",
        problems=["persistent[0]: a\nb"],  # a problem whose text spans lines stays one problem
    )
    reply = _invalid(error)
    assert reply.status_code == 422
    assert json.loads(reply.body) == {
        "error": "1 problem in language rows (first: persistent[0]: a; nothing was saved",
        "problems": ["persistent[0]: a\nb"],
    }
