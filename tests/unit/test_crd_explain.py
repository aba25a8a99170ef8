"""`kubectl explain consistencyeval` describes every node of the generated schema."""

from __future__ import annotations

from passhat.api.crd import IMPLICIT_NODES, build_crd, schema_nodes


def _root() -> dict[str, object]:
    schema: dict[str, object] = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def test_every_schema_node_has_a_description() -> None:
    """Coverage is 100 %: every field, list item and map value of spec and status (and the
    root's apiVersion and kind) carries a description; metadata is the API server's own
    ObjectMeta (a CRD may not describe it: the server refuses it)."""
    nodes = [(path, node) for path, node in schema_nodes(_root()) if path not in IMPLICIT_NODES]
    described = [path for path, node in nodes if str(node.get("description") or "").strip()]
    missing = sorted({path for path, _ in nodes} - set(described))
    assert missing == []
    assert len(described) / len(nodes) == 1.0
    # NB: the walk reaches list items and map values, the nodes that lacked descriptions
    paths = {path for path, _ in nodes}
    assert {".spec.ks[]", ".spec.grading.exitCodes.pass[]", ".status.flaky[]"} <= paths
    assert ".status.summary.infraErrorsByReason{}" in paths
    assert len(nodes) >= 100


def test_schema_nodes_walks_items_and_map_values() -> None:
    """schema_nodes yields properties, `[]` items and `{}` map values, depth first."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"type": "string"}},
            "m": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
    }
    assert [path for path, _ in schema_nodes(schema)] == ["", ".a", ".a[]", ".m", ".m{}"]
