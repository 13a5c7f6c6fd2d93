#!/usr/bin/env python3
"""Vendors the OpenAPI v3 schema of CustomResourceDefinitions into third_party/crd-schemas/.

The manifest tests (tests/python/test_deploy_manifests.py) check each custom object (ServiceMonitor,
ServingRuntime, ClusterServingRuntime, InferenceService) against the schema its CRD declares, the
one the API server would apply. Usage, with the CRD YAML files of the upstream projects:

    tools/vendor_crd_schemas.py SOURCE-NOTE crd.yaml [crd.yaml ...]

writes <kind>-<group>-<version>.json per served version (descriptions dropped: they are most of
the bytes and play no part in validation) and records SOURCE-NOTE in third_party/crd-schemas/SOURCES.
"""
import json
import pathlib
import sys

import yaml

OUT = pathlib.Path(__file__).resolve().parent.parent / "third_party" / "crd-schemas"


def strip(node, in_properties=False):
    """Drops the `description` keyword (never a property that happens to be named so)."""
    if isinstance(node, dict):
        return {k: strip(v, k == "properties" and not in_properties) for k, v in node.items()
                if in_properties or k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    note, files = argv[1], argv[2:]
    OUT.mkdir(parents=True, exist_ok=True)
    written = []
    for f in files:
        crd = yaml.safe_load(pathlib.Path(f).read_text())
        if crd.get("kind") != "CustomResourceDefinition":
            print(f"vendor_crd_schemas: {f}: not a CustomResourceDefinition", file=sys.stderr)
            return 1
        spec = crd["spec"]
        for v in spec["versions"]:
            if not v.get("served"):
                continue
            name = f"{spec['names']['kind'].lower()}-{spec['group']}-{v['name']}.json"
            schema = strip(v["schema"]["openAPIV3Schema"])
            (OUT / name).write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n")
            written.append(name)
    with open(OUT / "SOURCES", "a") as s:
        s.write(f"{note}: {', '.join(written)}\n")
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
