"""Kueue's own manifests, rewritten for a Kueue that runs as a host process of the test cluster.

Kueue's release installs a Deployment behind a Service; here the manager is a process on
the machine (hack/cluster/up.sh), so every webhook the API server calls (admission and CRD
conversion) is addressed by URL, `https://127.0.0.1:PORT<path>`, and trusted through the
cluster CA (`caBundle`). Read from stdin, written to stdout:

    crds      the CRDs of `kubectl kustomize <module>/config/components/crd`: each conversion
              webhook gets the URL and the CA.
    webhooks  <module>/config/components/webhook/manifests.yaml: only the pod webhooks and
              those of Kueue's own kinds are kept (the Job, Deployment, StatefulSet, Ray, ...
              ones would intercept every other engineer's objects on a shared cluster), and
              the pod webhooks only see pods that carry the `kueue.x-k8s.io/queue-name`
              label in namespaces labelled NAMESPACE_LABEL=true, so a stopped or broken
              Kueue never blocks anybody else's pods.
"""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import Any

import yaml

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
KUEUE_GROUP = "kueue.x-k8s.io"


def _client_config(url: str, ca: bytes) -> dict[str, Any]:
    return {"url": url, "caBundle": base64.b64encode(ca).decode()}


def crds(docs: list[dict[str, Any]], *, base: str, ca: bytes) -> list[dict[str, Any]]:
    """The CRDs, their conversion webhooks addressed at `base` and trusting `ca`."""
    out = []
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        conversion = doc["spec"].get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            webhook = conversion.setdefault("webhook", {})
            path = ((webhook.get("clientConfig") or {}).get("service") or {}).get("path")
            webhook["clientConfig"] = _client_config(base + (path or "/convert"), ca)
        out.append(doc)
    return out


def _kept(hook: dict[str, Any]) -> str | None:
    """'pod' for a pod webhook, 'kueue' for one of Kueue's own kinds, None otherwise."""
    rules = hook.get("rules") or []
    groups = {group for rule in rules for group in rule.get("apiGroups") or []}
    resources = {res for rule in rules for res in rule.get("resources") or []}
    if groups == {""} and resources == {"pods"}:
        return "pod"
    if groups == {KUEUE_GROUP}:
        return "kueue"
    return None


def webhooks(
    docs: list[dict[str, Any]], *, base: str, ca: bytes, namespace_label: str
) -> list[dict[str, Any]]:
    """The webhook configurations, cut down and fenced as the module docstring says."""
    out = []
    for doc in docs:
        if doc.get("kind") not in WEBHOOK_KINDS:
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            kind = _kept(hook)
            if kind is None:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = _client_config(base + path, ca)
            hook["timeoutSeconds"] = 5
            if kind == "pod":
                hook["namespaceSelector"] = {"matchLabels": {namespace_label: "true"}}
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": QUEUE_LABEL, "operator": "Exists"}]
                }
            kept.append(hook)
        doc["metadata"] = {"name": "kueue-" + doc["metadata"]["name"]}
        doc["webhooks"] = kept
        out.append(doc)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["crds", "webhooks"])
    parser.add_argument("--base", required=True, help="https://127.0.0.1:PORT")
    parser.add_argument("--ca", required=True, type=Path, help="PEM of the CA of the serving cert")
    parser.add_argument("--namespace-label", default="passhat.dev/test-kueue")
    args = parser.parse_args()
    docs = [doc for doc in yaml.safe_load_all(sys.stdin) if doc]
    ca = args.ca.read_bytes()
    if args.what == "crds":
        out = crds(docs, base=args.base, ca=ca)
    else:
        out = webhooks(docs, base=args.base, ca=ca, namespace_label=args.namespace_label)
    if not out:
        print(f"kueue_manifests.py: no {args.what} in the input", file=sys.stderr)
        return 1
    yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
