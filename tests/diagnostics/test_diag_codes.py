"""The code registry: every code well formed, documented and linked."""

import re

import pytest

from tilelang.diagnostics import Severity, codes

REQUIRED = {
    "TL0001", "TL0002", "TL0003",
    "TL0101", "TL0102", "TL0103",
    "TL0201", "TL0202", "TL0203",
    "TL0301", "TL0302",
    "TL0401", "TL0402", "TL0403",
    "TL0501", "TL0502",
    "TL0601", "TL0602", "TL0603", "TL0604",
    "TL0701", "TL0702",
    "TL0801",
    "TL0901",
}  # fmt: skip


def test_required_codes_are_registered():
    assert REQUIRED <= {c.code for c in codes.all_codes()}


def test_codes_and_names_are_unique_and_well_formed():
    entries = codes.all_codes()
    assert [c.code for c in entries] == sorted({c.code for c in entries})
    assert len({c.name for c in entries}) == len(entries)
    for c in entries:
        assert re.fullmatch(r"TL\d{4}", c.code)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", c.name), c.name
        assert isinstance(c.default_severity, Severity)
        assert c.summary and c.summary.endswith("."), c.code


@pytest.mark.parametrize("entry", codes.all_codes(), ids=lambda c: c.code)
def test_every_code_has_all_doc_sections(entry):
    sections = entry.sections()
    assert list(sections) == list(codes.DOC_SECTIONS), entry.code
    assert all(body for body in sections.values()), entry.code
    assert "```" in sections["Example"], f"{entry.code}: the example should be a code block"


def test_url_is_derived_from_the_code():
    assert codes.get("TL0201").url == "https://tilelang.dev/diagnostics#tl0201"


def test_internal_error_asks_for_a_report():
    assert "report" in codes.get("TL0003").summary.lower()


def test_get_and_lookup():
    assert codes.get("TL0101") is codes.GEMM_SHAPE_MISMATCH
    assert codes.lookup("TL9999") is None
    with pytest.raises(KeyError):
        codes.get("TL9999")


def test_defining_a_code_twice_or_malformed_is_refused():
    with pytest.raises(ValueError):
        codes._define("TL0101", "again", Severity.ERROR, "s.", "d")
    with pytest.raises(ValueError):
        codes._define("TL101", "short", Severity.ERROR, "s.", "d")
