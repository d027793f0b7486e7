"""Check values.yaml against the Zero to JupyterHub chart's schema, the way helm merges values.

    python classroom/z2jh/check_values.py CHART_FOLDER   # a checkout or unpacked chart: jupyterhub/

The chart (https://hub.jupyter.org/helm-chart/, or jupyterhub/ in the zero-to-jupyterhub-k8s
repository) carries ``values.yaml`` (its defaults) and ``values.schema.yaml``/``.json``; helm
merges our values over the defaults and validates the result. Prints every violation; exit 1 if any.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import jsonschema
import yaml

VALUES = Path(__file__).resolve().parent / "values.yaml"


def merged(defaults: dict, ours: dict) -> dict:
    r"""``ours`` over ``defaults``, mappings merged key by key (helm's rule)."""
    out = copy.deepcopy(defaults)
    for key, value in ours.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def violations(chart: Path, values: Path = VALUES) -> list[str]:
    r"""What the chart at ``chart`` finds wrong with ``values`` merged over its defaults."""
    schema_file = next((chart / name for name in ("values.schema.json", "values.schema.yaml")
                        if (chart / name).exists()), None)
    if schema_file is None:
        raise FileNotFoundError(f"chart={chart}: no values.schema.json or values.schema.yaml there")
    schema = json.loads(schema_file.read_text()) if schema_file.suffix == ".json" else yaml.safe_load(schema_file.read_text())
    document = merged(yaml.safe_load((chart / "values.yaml").read_text()), yaml.safe_load(values.read_text()))
    return [f"{error.json_path}: {error.message}" for error in jsonschema.Draft7Validator(schema).iter_errors(document)]


def main(argv: list[str] | None = None) -> int:
    r"""The command line; 1 if the values break the schema."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("chart", type=Path, help="the chart's folder (holds values.yaml and its schema)")
    parser.add_argument("--values", type=Path, default=VALUES)
    args = parser.parse_args(argv)
    found = violations(args.chart, args.values)
    print(*found, sep="\n") if found else print(f"{args.values} is valid against {args.chart}'s schema")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
