"""The catalog's rules, enforced strictly by parse_catalog (GW-2, contracts/gateway.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provisioner.runtime import CatalogError, ServerNotListed, parse_catalog
from provisioner.runtime.gateway.catalog import decode_catalog_json

BASE = "http://127.0.0.1:8787"


def valid() -> dict[str, Any]:
    return {
        "schemaVersion": 1,
        "generation": 7,
        "digest": "sha256:" + "0123456789abcdef" * 4,
        "servers": [
            {"id": "github", "path": "/s/github/mcp", "tools": ["search_code"]},
            {
                "id": "loom",
                "path": "/s/loom/mcp",
                "tools": ["loom_context_pack", "loom_memory_set", "loom_search"],
                "displayName": "Loom",
                "description": "Long-term memory",
            },
        ],
    }


def broken(change) -> dict[str, Any]:
    payload = copy.deepcopy(valid())
    change(payload)
    return payload


def _set(path: list[Any], value: Any):
    def change(payload: dict[str, Any]) -> None:
        target = payload
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


def _drop(key: str):
    return lambda payload: payload.pop(key)


BROKEN_RULES = {
    "not an object": lambda payload: payload.clear() or payload.update({"x": 1}),
    "schemaVersion 2": _set(["schemaVersion"], 2),
    "schemaVersion as text": _set(["schemaVersion"], "1"),
    "schemaVersion true": _set(["schemaVersion"], True),
    "generation missing": _drop("generation"),
    "generation negative": _set(["generation"], -1),
    "generation a boolean": _set(["generation"], False),
    "generation a float": _set(["generation"], 7.0),
    "digest uppercase": _set(["digest"], "sha256:" + "A" * 64),
    "digest short": _set(["digest"], "sha256:" + "a" * 63),
    "digest with newline": _set(["digest"], "sha256:" + "a" * 64 + "\n"),
    "digest other algorithm": _set(["digest"], "md5:" + "a" * 64),
    "servers not a list": _set(["servers"], {}),
    "server not an object": _set(["servers", 0], "github"),
    "servers out of order": lambda payload: payload["servers"].reverse(),
    "servers duplicated": lambda payload: payload["servers"].append(payload["servers"][1]),
    "id with capital": _set(["servers", 0, "id"], "GitHub"),
    "id ending in dash": _set(["servers", 0, "id"], "git-"),
    "id too long": _set(["servers", 0, "id"], "a" * 33),
    "id starting with digit": _set(["servers", 0, "id"], "1loom"),
    "path of another id": _set(["servers", 1, "path"], "/s/github/mcp"),
    "path with prefix": _set(["servers", 1, "path"], "/x/s/loom/mcp"),
    "tools empty": _set(["servers", 1, "tools"], []),
    "tools unsorted": _set(["servers", 1, "tools"], ["loom_search", "loom_context_pack"]),
    "tools duplicated": _set(["servers", 1, "tools"], ["loom_search", "loom_search"]),
    "tool name with space": _set(["servers", 1, "tools"], ["loom search"]),
    "tool name too long": _set(["servers", 1, "tools"], ["t" * 129]),
    "tool not a string": _set(["servers", 1, "tools"], [7]),
    "displayName not a string": _set(["servers", 1, "displayName"], 5),
    "description null": _set(["servers", 1, "description"], None),
}


class TestParseCatalog:
    def test_a_valid_catalog_gives_each_server_its_url(self) -> None:
        catalog = parse_catalog(valid(), BASE + "/")
        loom = catalog.require("loom")
        assert loom.url == "http://127.0.0.1:8787/s/loom/mcp"
        assert loom.tools == ("loom_context_pack", "loom_memory_set", "loom_search")
        assert (loom.display_name, loom.description) == ("Loom", "Long-term memory")
        assert catalog.generation == 7 and catalog.lists("github")

    @pytest.mark.parametrize("change", BROKEN_RULES.values(), ids=BROKEN_RULES.keys())
    def test_a_catalog_breaking_a_rule_is_rejected(self, change) -> None:
        with pytest.raises(CatalogError) as caught:
            parse_catalog(broken(change), BASE)
        assert caught.value.reason == "invalid"

    def test_unknown_fields_are_ignored(self) -> None:
        payload = broken(_set(["servers", 1, "upstream"], "ignored"))
        payload["future"] = {"anything": True}
        assert parse_catalog(payload, BASE).lists("loom")

    def test_the_nerve_server_is_never_used(self) -> None:
        nerve = {"id": "nerve", "path": "/s/nerve/mcp", "tools": ["memorize"]}
        catalog = parse_catalog(broken(lambda p: p["servers"].append(nerve)), BASE)
        assert not catalog.lists("nerve")
        with pytest.raises(ServerNotListed):
            catalog.require("nerve")

    @pytest.mark.parametrize(
        "base",
        ["ftp://gw", "127.0.0.1:8787", "http://user:secret@gw:8787", "http://gw/?x=1", ""],
    )
    def test_a_base_url_that_is_not_plain_http_is_refused(self, base: str) -> None:
        with pytest.raises(ValueError):
            parse_catalog(valid(), base)


class TestStrictJson:
    @pytest.mark.parametrize(
        "body",
        [b'{"a": 1, "a": 2}', b'{"generation": NaN}', b"\xff{}", b"{", b'{"a": Infinity}'],
        ids=["duplicate key", "NaN", "not UTF-8", "truncated", "Infinity"],
    )
    def test_bodies_that_are_not_strict_json_are_refused(self, body: bytes) -> None:
        with pytest.raises(CatalogError) as caught:
            decode_catalog_json(body)
        assert caught.value.reason == "not_json"
