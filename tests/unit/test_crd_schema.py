"""The generated CRD is structural, validates what the models validate, and prints well."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from passhat.api.crd import PRINTER_COLUMNS, build_crd
from passhat.api.status import EvalStatus


def version() -> dict[str, Any]:
    crd = build_crd()
    assert crd["spec"]["group"] == "passhat.dev"
    assert crd["spec"]["names"]["shortNames"] == ["ceval"]
    (only,) = crd["spec"]["versions"]
    assert only["name"] == "v1alpha1" and only["subresources"] == {"status": {}}
    return dict(only)


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, prop in (schema.get("properties") or {}).items():
        yield from nodes(prop, f"{path}.{name}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")


def test_schema_is_structural() -> None:
    """Every node has a type, no refs/unions remain; an object without properties is
    either free-form (preserve-unknown-fields) or a map of typed values (what CEL rules
    can range over), never both."""
    root = version()["schema"]["openAPIV3Schema"]
    for path, node in nodes(root):
        assert "type" in node, path
        for banned in ("$ref", "anyOf", "oneOf", "allOf", "title"):
            assert banned not in node, (path, banned)
        if "additionalProperties" in node:
            assert node["additionalProperties"].get("type"), path
            assert "x-kubernetes-preserve-unknown-fields" not in node, path
        elif node["type"] == "object" and "properties" not in node and path != ".metadata":
            assert node.get("x-kubernetes-preserve-unknown-fields") is True, path


def test_every_field_is_described() -> None:
    """`kubectl explain` has a description for every spec and status field."""
    root = version()["schema"]["openAPIV3Schema"]
    for section in ("spec", "status"):
        for path, node in nodes(root["properties"][section], section):
            if not path.endswith("[]") or node.get("type") == "object":
                assert node.get("description"), path


def test_free_form_fields_keep_unknown_fields() -> None:
    """The pod template and task params are preserved as given."""
    spec = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert spec["trial"]["properties"]["template"]["x-kubernetes-preserve-unknown-fields"]
    assert spec["tasks"]["items"]["properties"]["params"]["x-kubernetes-preserve-unknown-fields"]


def test_admission_checks() -> None:
    """Bounds, unique task ids and ks, and the CEL rules for k <= trials and immutability."""
    spec = version()["schema"]["openAPIV3Schema"]["properties"]["spec"]
    props = spec["properties"]
    assert props["trials"]["minimum"] == 1
    assert props["parallelism"]["minimum"] == 1
    assert props["ks"]["items"]["minimum"] == 1
    assert props["ks"]["x-kubernetes-list-type"] == "set"
    assert props["tasks"]["x-kubernetes-list-type"] == "map"
    assert props["tasks"]["x-kubernetes-list-map-keys"] == ["id"]
    rules = {rule["rule"] for rule in spec["x-kubernetes-validations"]}
    assert "!has(self.ks) || self.ks.all(k, k <= self.trials)" in rules
    assert "!has(self.gate) || self.gate.k <= self.trials" in rules
    assert "has(self.tasks) != has(self.tasksFrom)" in rules
    assert "self == oldSelf" in rules
    labels = props["trial"]["properties"]["template"]["properties"]["metadata"]["properties"]
    (label_rule,) = labels["labels"]["x-kubernetes-validations"]
    assert label_rule["rule"] == "self.all(k, !k.startsWith('passhat.dev/'))"


def test_printer_columns_point_at_status_fields() -> None:
    """Every column reads a field the status model has (or metadata), with plain paths."""
    status_props = version()["schema"]["openAPIV3Schema"]["properties"]["status"]
    names = [c["name"] for c in PRINTER_COLUMNS]
    assert names[:2] == ["Phase", "Done"] and names[-1] == "Age"
    for column in PRINTER_COLUMNS:
        path = column["jsonPath"]
        assert "[-" not in path, "negative indexes misbehave in the API server's JSONPath"
        if path.startswith(".metadata"):
            continue
        node: dict[str, Any] = {"properties": {"status": status_props}}
        for part in path.lstrip(".").split("."):
            name, _, index = part.partition("[")
            node = node["properties"][name]
            if index:
                node = node["items"]
        assert node["type"] in ("string", "integer", "number", "boolean"), path
    assert "flakyCount" in EvalStatus.model_json_schema(by_alias=True)["properties"]
