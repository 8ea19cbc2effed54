#!/usr/bin/env python3
"""Make seeded variants of upstream's own distribution configs for the
upstream corpus: each variant is one shipped config (run.yaml, config.yaml
from 0.4 on) with one to three random edits of the kinds a user or an
operator makes (providers switched on by their variables, stores and
backends moved, removed or misnamed, keys of another line, resources naming
missing providers, server settings), and its container environment beside
it (FILE.env). Upstream's start-up then judges each (corpus.sh); nothing
here decides what is valid.

    python3 hack/llamastack/seeds.py --out DIR --seeds N [--first S] CONFIG.yaml...

Paths the edits write stay under /tmp and /var/lib/llama-stack (writable in
upstream-startup.sh's sandbox, as in the operator's pods).
"""

import argparse
import copy
import os
import random
import re

import yaml

COND = re.compile(r"\$\{env\.([A-Z0-9_]+):\+[^}]*\}")
ANY = re.compile(r"\$\{env\.([A-Z0-9_]+)")
BASE_ENV = {"INFERENCE_MODEL": "meta-llama/Llama-3.2-3B-Instruct", "SAFETY_MODEL": "meta-llama/Llama-Guard-3-1B"}
VALUES = ["x", "http://h.example:8000/v1", "/var/lib/llama-stack/d", "true", "8000"]
OTHER_LINES = {"image_name": "s", "telemetry": {"enabled": True}, "metadata_store": {"type": "sqlite", "db_path": "/tmp/k.db"},
               "models": [], "inference_store": {"type": "sqlite", "db_path": "/tmp/i.db"}, "connectors": []}
APIS = ["agents", "telemetry", "post_training", "eval", "datasetio", "scoring", "responses", "messages", "interactions",
        "files", "file_processors", "connectors", "admin", "inference", "vector_io"]


def edits(doc, env, text, rnd):
    """The possible edits of doc (a config) and env, as (name, function)."""
    out = []
    conds = sorted(set(COND.findall(text)))
    names = sorted(set(ANY.findall(text)))
    if conds:
        def on(d, e):
            e[rnd.choice(conds)] = rnd.choice(VALUES)
        out.append(("env-on", on))
    if names:
        def setvar(d, e):
            e[rnd.choice(names)] = rnd.choice(VALUES + [""])
        out.append(("env-set", setvar))
    st = doc.get("storage")
    if isinstance(st, dict):
        out.append(("no-storage", lambda d, e: d.pop("storage", None)))
        stores = st.get("stores") or {}
        backends = st.get("backends") or {}
        if stores:
            def drop_store(d, e):
                d["storage"]["stores"].pop(rnd.choice(sorted(stores)), None)
            out.append(("drop-store", drop_store))

            def null_store(d, e):
                d["storage"]["stores"][rnd.choice(sorted(stores))] = None
            out.append(("null-store", null_store))

            def store_backend(d, e):
                s = d["storage"]["stores"][rnd.choice(sorted(stores))]
                if isinstance(s, dict):
                    s["backend"] = rnd.choice(sorted(backends) + ["missing"])
            out.append(("store-backend", store_backend))

            def table(d, e):
                s = d["storage"]["stores"][rnd.choice(sorted(stores))]
                if isinstance(s, dict):
                    s["table_name" if "table_name" in s else "namespace"] = rnd.choice(["t1", "history", "x y"])
            out.append(("store-name", table))
        if backends:
            def drop_backend(d, e):
                d["storage"]["backends"].pop(rnd.choice(sorted(backends)), None)
            out.append(("drop-backend", drop_backend))

            def backend_path(d, e):
                b = d["storage"]["backends"][rnd.choice(sorted(backends))]
                if isinstance(b, dict) and "db_path" in b:
                    b["db_path"] = rnd.choice(["/var/lib/llama-stack/s/kv.db", "/tmp/x/store.db", "rel/store.db"])
            out.append(("backend-path", backend_path))

            def backend_type(d, e):
                b = d["storage"]["backends"][rnd.choice(sorted(backends))]
                if isinstance(b, dict):
                    b["type"] = rnd.choice(["kv_sqlite", "sql_sqlite", "kv_redis", "sqlite"])
            out.append(("backend-type", backend_type))
        out.append(("no-stores", lambda d, e: d["storage"].pop("stores", None)))
        out.append(("no-backends", lambda d, e: d["storage"].pop("backends", None)))
    provs = doc.get("providers") or {}
    if provs:
        def drop_api(d, e):
            d["providers"].pop(rnd.choice(sorted(provs)), None)
        out.append(("drop-api", drop_api))

        def rename_api(d, e):
            a = rnd.choice(sorted(provs))
            d["providers"][rnd.choice(APIS)] = d["providers"].pop(a)
        out.append(("rename-api", rename_api))

        def drop_provider(d, e):
            a = rnd.choice(sorted(provs))
            if d["providers"][a]:
                d["providers"][a].pop(rnd.randrange(len(d["providers"][a])))
        out.append(("drop-provider", drop_provider))

        def provider_type(d, e):
            a = rnd.choice(sorted(provs))
            if d["providers"][a]:
                p = rnd.choice(d["providers"][a])
                p["provider_type"] = rnd.choice(["inline::builtin", "inline::meta-reference", "remote::vllm", "inline::nope", "vllm"])
        out.append(("provider-type", provider_type))

        def provider_config(d, e):
            a = rnd.choice(sorted(provs))
            if d["providers"][a]:
                p = rnd.choice(d["providers"][a])
                cfg = p.get("config") or {}
                if cfg:
                    k = rnd.choice(sorted(cfg))
                    cfg[k] = rnd.choice([None, "", 3, {"a": 1}, "/var/lib/llama-stack/p"])
                    p["config"] = cfg
        out.append(("provider-config", provider_config))
    if isinstance(doc.get("apis"), list):
        def apis(d, e):
            if rnd.random() < 0.5 and d["apis"]:
                d["apis"].pop(rnd.randrange(len(d["apis"])))
            else:
                d["apis"].append(rnd.choice(APIS))
        out.append(("apis", apis))
        out.append(("no-apis", lambda d, e: d.pop("apis", None)))

    def other_line(d, e):
        k = rnd.choice(sorted(OTHER_LINES))
        d[k] = copy.deepcopy(OTHER_LINES[k])
    out.append(("other-line", other_line))

    def distro(d, e):
        name = d.pop("distro_name", None) or d.pop("image_name", None) or "s"
        d[rnd.choice(["image_name", "distro_name", "name"])] = name
    out.append(("distro-name", distro))
    out.append(("no-name", lambda d, e: (d.pop("distro_name", None), d.pop("image_name", None))))

    rr = doc.get("registered_resources")
    if isinstance(rr, dict):
        def model(d, e):
            ms = d["registered_resources"].setdefault("models", []) or []
            ms.append({"model_id": rnd.choice(["m1", "", "${env.NOPE:+m}"]), "provider_id": rnd.choice(
                ["all", "nope", "sentence-transformers", "${env.OLLAMA_URL:+ollama}", "openai"]),
                "model_type": rnd.choice(["llm", "embedding"]), "metadata": {"embedding_dimension": 8}})
            d["registered_resources"]["models"] = ms
        out.append(("model", model))

        def shield(d, e):
            ss = d["registered_resources"].setdefault("shields", []) or []
            ss.append({"shield_id": rnd.choice(["s1", ""]), "provider_id": rnd.choice(["llama-guard", "nope", "all"])})
            d["registered_resources"]["shields"] = ss
        out.append(("shield", shield))
        for k in sorted(rr):
            out.append(("drop-resources-" + k, lambda d, e, k=k: d["registered_resources"].pop(k, None)))
    vs = doc.get("vector_stores")
    if isinstance(vs, dict):
        out.append(("no-vector-stores", lambda d, e: d.pop("vector_stores", None)))

        def embed(d, e):
            d["vector_stores"]["default_embedding_model"] = {
                "provider_id": rnd.choice(["sentence-transformers", "nope", "openai"]),
                "model_id": rnd.choice(["nomic-ai/nomic-embed-text-v1.5", "other"])}
        out.append(("embedding-model", embed))
        if "default_reranker_model" in vs:
            out.append(("no-reranker", lambda d, e: d["vector_stores"].pop("default_reranker_model", None)))

    def server(d, e):
        s = d.setdefault("server", {}) or {}
        k = rnd.choice(["port", "host", "workers", "tls_certfile", "auth", "nope"])
        s[k] = {"port": rnd.choice([8321, "x"]), "host": rnd.choice(["0.0.0.0", None]), "workers": rnd.choice([1, 2, 0]),
                "tls_certfile": "/tmp/c.pem", "auth": {"provider_config": {"type": rnd.choice(["${env.AUTH:+oauth2_token}", ""])}},
                "nope": 1}[k]
        d["server"] = s
    out.append(("server", server))

    def external(d, e):
        d["external_providers_dir"] = rnd.choice(["/var/lib/llama-stack/providers.d", "/tmp/ext", "rel-ext", None])
    out.append(("external-providers-dir", external))
    out.append(("no-version", lambda d, e: d.pop("version", None)))
    out.append(("version-3", lambda d, e: d.__setitem__("version", 3)))

    def state_dir(d, e):
        e[rnd.choice(["SQLITE_STORE_DIR", "FILES_STORAGE_DIR", "LLAMA_STACK_CONFIG_DIR", "OGX_CONFIG_DIR"])] = \
            rnd.choice(["/var/lib/llama-stack/state", "/tmp/state"])
    out.append(("state-dir", state_dir))
    out.append(("no-base-env", lambda d, e: [e.pop(k, None) for k in BASE_ENV]))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seeds", type=int, default=300)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    bases = []
    for f in sorted(args.files):
        with open(f) as fh:
            text = fh.read()
        # <pkg>/distributions/<name>/config.yaml: named by its distribution
        bases.append((os.path.basename(os.path.dirname(os.path.abspath(f))), yaml.safe_load(text), text))
    for seed in range(args.first, args.first + args.seeds):
        rnd = random.Random(seed)
        name, base, text = rnd.choice(bases)
        doc, env = copy.deepcopy(base), dict(BASE_ENV)
        applied = []
        for _ in range(rnd.randint(1, 3)):
            choices = edits(doc, env, text, rnd)
            label, fn = rnd.choice(choices)
            try:
                fn(doc, env)
            except (KeyError, TypeError, AttributeError, IndexError):
                continue  # an earlier edit removed what this one edits
            applied.append(label)
        stem = "seed-%04d-%s-%s" % (seed, name, "+".join(applied) or "none")
        with open(os.path.join(args.out, stem + ".yaml"), "w") as out:
            yaml.safe_dump(doc, out, sort_keys=False)
        with open(os.path.join(args.out, stem + ".env"), "w") as out:
            yaml.safe_dump(env, out)


if __name__ == "__main__":
    main()
