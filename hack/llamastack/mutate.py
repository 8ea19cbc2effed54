#!/usr/bin/env python3
"""Make the wrong-type and unknown-key cases of the upstream corpus: from
accepted run configs (FILE.yaml with FILE.env beside it), copies with one
provider's config given a key its class lacks, or a value of the wrong type
for a field its class has (read from schemas.json at the tag).

    python3 hack/llamastack/mutate.py --schemas schemas.json --out DIR [--max N] FILE.yaml...
"""

import argparse
import json
import os
import re
import shutil

import yaml

COND = re.compile(r"^\$\{env\.([A-Z0-9_]+):\+([^}]*)\}$")


def enabled(providers, env):
    for api, plist in sorted((providers or {}).items()):
        for p in plist or []:
            pid = str(p.get("provider_id") or "")
            m = COND.match(pid)
            if m and not env.get(m.group(1)):
                continue
            if pid and pid != "__disabled__" and not p.get("module"):
                yield api, p


def wrong(prop):
    """A value of the wrong type for a property's schema, or None."""
    types = {b.get("type") for b in [prop] + prop.get("anyOf", [])}
    if "string" in types and "integer" not in types and "boolean" not in types:
        return {"a": "mapping"}
    if "integer" in types and "string" not in types:
        return "not-a-number"
    if "boolean" in types and "string" not in types:
        return "maybe"
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schemas", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max", type=int, default=40)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    schemas = json.load(open(args.schemas))["providers"]
    os.makedirs(args.out, exist_ok=True)
    n, seen = 0, set()
    for f in args.files:
        env_file = os.path.splitext(f)[0] + ".env"
        env = yaml.safe_load(open(env_file)) if os.path.exists(env_file) else {}
        doc = yaml.safe_load(open(f))
        for api, p in enabled(doc.get("providers"), env):
            t = p.get("provider_type")
            if (api, t) in seen or t not in schemas.get(api, {}):
                continue
            seen.add((api, t))
            props = schemas[api][t]["schema"].get("properties", {})
            cases = [("unknown", "not_a_field", 1)]
            for name in sorted(props):
                v = wrong(props[name])
                if v is not None:
                    cases.append(("wrongtype", name, v))
                    break
            for kind, key, value in cases:
                if n >= args.max:
                    return
                old = p.get("config")
                p["config"] = dict(old or {}, **{key: value})
                name = "mut-%s-%s-%s-%s" % (kind, api, t.replace("::", "-"), key)
                with open(os.path.join(args.out, name + ".yaml"), "w") as out:
                    yaml.safe_dump(doc, out, sort_keys=False)
                if os.path.exists(env_file):
                    shutil.copy(env_file, os.path.join(args.out, name + ".env"))
                p["config"] = old
                n += 1


if __name__ == "__main__":
    main()
