"""The project's words (lookalike.vocab): the three labels and their grades, the rubric per kind of
unit, what a unit is called, and the demo's money figures."""

from lookalike import vocab


def test_the_three_labels_carry_descending_grades_and_read_back():
    assert vocab.LABELS == ("sufficient", "supporting", "irrelevant")
    assert [vocab.LABEL_GRADES[x] for x in vocab.LABELS] == [2, 1, 0]
    assert all(vocab.GRADE_LABELS[vocab.LABEL_GRADES[x]] == x for x in vocab.LABELS)
    assert set(vocab.LABEL_MEANINGS) == set(vocab.PHOTO_LABEL_MEANINGS) == set(vocab.LABELS)


def test_photos_and_image_folders_are_labelled_by_the_photo_rubric_everything_else_by_the_documents():
    assert vocab.label_meanings("photo") is vocab.PHOTO_LABEL_MEANINGS
    assert vocab.label_meanings("image") is vocab.PHOTO_LABEL_MEANINGS
    assert vocab.label_meanings("page") is vocab.LABEL_MEANINGS
    assert vocab.label_meanings() is vocab.LABEL_MEANINGS


def test_a_unit_is_a_photo_only_when_every_unit_is_one():
    assert vocab.unit_noun("manifest", ["photo", "photo"]) == "photo"
    assert vocab.unit_noun("manifest", ["photo", "chart"]) == "page"     # a mixed corpus stays pages
    assert vocab.unit_noun("images") == "image"
    assert vocab.unit_noun("images", ["photo"]) == "photo"
    assert vocab.unit_noun("pdf") == vocab.unit_noun("manifest", []) == "page"


def test_money_is_printed_as_the_demo_pages_print_it():
    assert vocab.money(1234.4) == "$1,234M"
    assert vocab.money(0) == "$0M"
    assert vocab.money(999.6) == "$1,000M"     # whole millions, with thousands separators
