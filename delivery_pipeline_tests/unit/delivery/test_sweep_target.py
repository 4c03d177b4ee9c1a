"""What a sweep targets, as one value: refused where it is made when it names no
row, named the same in logs and answers, swept in one order."""

from __future__ import annotations

import pytest

from delivery_pipeline.delivery.sweep_target import BIGINT_MAX, EVERYTHING, SweepTarget


@pytest.mark.parametrize("bad", [0, -1, BIGINT_MAX + 1, True, "7", 1.0])
@pytest.mark.parametrize("field", ["person_id", "document_id"])
def test_an_id_no_row_can_have_is_refused_naming_its_field(field, bad):
    with pytest.raises(ValueError, match=field):
        SweepTarget(**{field: bad})


def test_the_largest_id_is_a_target():
    assert SweepTarget.document(BIGINT_MAX).named == {"document_id": BIGINT_MAX}


def test_a_target_names_only_what_it_targets():
    assert EVERYTHING.whole_queue and EVERYTHING.named == {}
    assert SweepTarget.person(7).named == {"person_id": 7}
    both = SweepTarget(person_id=7, document_id=42)
    assert not both.whole_queue and both.named == {"person_id": 7, "document_id": 42}


def test_the_same_target_twice_is_one_sweep():
    targets = {SweepTarget.person(7), SweepTarget.person(7)} | SweepTarget.documents([3, 3, 4])
    assert targets == {SweepTarget.person(7), SweepTarget.document(3), SweepTarget.document(4)}


def test_people_who_wrote_are_swept_before_documents_given_back():
    targets = [SweepTarget.document(1), SweepTarget.person(9), SweepTarget.person(2)]
    assert sorted(targets, key=SweepTarget.order) == [
        SweepTarget.person(2),
        SweepTarget.person(9),
        SweepTarget.document(1),
    ]


def test_a_target_is_a_value():
    target = SweepTarget.person(7)
    with pytest.raises(AttributeError):
        target.person_id = 8  # type: ignore[misc]
