"""`loads_in_items` decodes what `json.loads` decodes, and refuses what it refuses."""

from __future__ import annotations

import json

import pytest

from sidecar.broker.json_items import loads_in_items

ACCEPTED = [
    "[]", " [ ] ", "[1]", '[{"name": "q", "arguments": {"x-max-length": 5}}, [], "s", null]',
    '\n[\r\n\t{"a": [1, 2, {"b": null}]} ,\n {"c": "]"} ]\n', '{"queues": [1, 2]}', "3",
    '"text"', "null", '[1.5e3, -0, true, false, "\\u00e9\\"]"]',
]
REFUSED = ["", "[", "[1,]", "[1 2]", "[1]]", "[1] x", "[,1]", "{", "[1,", "]"]


@pytest.mark.parametrize("text", ACCEPTED)
def test_it_decodes_what_json_loads_does(text: str) -> None:
    assert loads_in_items(text) == json.loads(text)
    assert loads_in_items(text.encode()) == json.loads(text.encode())


@pytest.mark.parametrize("text", REFUSED)
def test_it_refuses_what_json_loads_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads_in_items(text)


def test_other_encodings_and_a_bom_as_json_loads_takes_them() -> None:
    for body in ('[{"q": "é"}]'.encode("utf-16"), b'\xef\xbb\xbf[1, 2]'):
        assert loads_in_items(body) == json.loads(body)


def test_a_listing_of_ten_thousand_queues_is_decoded_whole() -> None:
    listing = [{"name": f"q{i}", "vhost": "/", "messages": i, "arguments": {}}
               for i in range(10_000)]
    assert loads_in_items(json.dumps(listing).encode()) == listing
