#!/usr/bin/env python3
"""Reads upstream-startup.sh's verdicts (stdin) and writes the corpus test
data (stdout): each config's text, its container environment (FILE.env) and
upstream's verdict. Configs are deduplicated by text and environment."""

import argparse
import hashlib
import json
import os
import sys

import yaml


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    configs, seen = [], set()
    for line in sys.stdin:
        d = json.loads(line)
        text = open(d["file"]).read()
        env_file = os.path.splitext(d["file"])[0] + ".env"
        env = yaml.safe_load(open(env_file)) if os.path.exists(env_file) else {}
        env = {k: str(v) for k, v in (env or {}).items()}
        key = hashlib.sha256((text + json.dumps(env, sort_keys=True)).encode()).hexdigest()
        if key in seen:
            continue
        seen.add(key)
        name = os.path.splitext(os.path.basename(d["file"]))[0]
        c = {"name": name, "config": text, "env": env, "accepted": d["ok"], "dropped": d.get("dropped") or []}
        if not d["ok"]:
            c["error"] = d["error"].split("\n")[0]
        configs.append(c)
    configs.sort(key=lambda c: c["name"])
    json.dump({"upstream": "llamastack/llama-stack", "tag": args.tag,
               "generated_by": "hack/llamastack/corpus.sh (upstream's start-up code at the tag, upstream-startup.sh); do not edit",
               "home": "/tmp", "workdir": "/tmp", "configs": configs}, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
