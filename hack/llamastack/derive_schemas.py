#!/usr/bin/env python3
"""Derive the JSON Schemas of a Llama Stack tag's config models, as pydantic
emits them (model_json_schema(), validation mode), and write them as JSON
(stdout) for operator/runconfig/distributions/<tag>/schemas.json.

    python3 hack/llamastack/derive_schemas.py --upstream DIR --tag TAG > schemas.json

Nothing here is keyed by tag; each fact is read from upstream's code at the
tag, or the script exits naming the fact it could not derive:
  * run_config: the class Stack.__init__ takes (llama_stack/core/stack.py:
    StackRunConfig at 0.2/0.3, StackConfig at 0.7), its schema;
  * providers: for every provider type of get_provider_registry(), the
    schema of its config_class;
  * extra: for every model a schema holds, by its title, pydantic's
    extra-fields behaviour (model_config["extra"]; pydantic's default,
    "ignore", when unset): what upstream does with a key the model lacks;
  * before_validators / before_model_validators: the fields (models) whose
    validators see the input before pydantic's own validation (mode before,
    wrap, plain): their input is not what the schema describes;
  * endpoint / secret: the field of a provider's config class that takes its
    URL and its secret, read from the schema (endpoint_field, secret_field).
"""

import argparse
import importlib
import inspect
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import upstream_startup as us  # noqa: E402


def fail(fact, why):
    sys.exit("derive_schemas: cannot derive %s: %s" % (fact, why))


def load_upstream(upstream):
    """Makes upstream's package at the checkout importable (llama_stack, ogx
    from 0.8.0; its
    third-party imports stubbed, its 3.12-only syntax rewritten: see
    upstream_startup.py) and quiets its logging; returns the package root."""
    root = package_root(upstream)
    us.use_package(root)
    sys.path.insert(0, root)
    sys.meta_path.append(us._StubFinder(root + os.sep))
    sys.meta_path.insert(0, us._UpstreamFinder(root))
    sys.dont_write_bytecode = True
    import logging

    logging.disable(logging.CRITICAL)
    return root


def package_root(upstream):
    """The folder holding the upstream package (the checkout, or its src/
    from 0.4 on)."""
    for root in (upstream, os.path.join(upstream, "src")):
        if us.package_of(root):
            return os.path.abspath(root)
    fail("the package root", "no single %s/core/stack.py under %s or its src/" % ("|".join(us.PACKAGES), upstream))


def schema_of(cls, fact):
    """cls.model_json_schema(), and the extra behaviour of every model it
    holds, keyed by the title pydantic gives the model's schema."""
    from pydantic.json_schema import GenerateJsonSchema

    extra, before, before_model = {}, {}, set()

    class Recording(GenerateJsonSchema):
        # records, never changes: the schema is pydantic's own
        def model_schema(self, schema):
            js = super().model_schema(schema)
            m = schema["cls"]
            mode = (m.model_config.get("extra") or "ignore") if hasattr(m, "model_config") else "ignore"
            title = m.model_config.get("title") or m.__name__
            if extra.get(title, mode) != mode:
                fail(fact, "two models titled %s differ in extra (%s, %s)" % (title, extra[title], mode))
            extra[title] = mode
            # validators that run before pydantic's own (mode before, wrap or
            # plain) take input the schema does not describe (TelemetryConfig
            # splits a comma-separated sinks string): recorded by field
            dec = getattr(m, "__pydantic_decorators__", None)
            if dec is not None:
                pre = sorted({f for v in dec.field_validators.values() if v.info.mode in ("before", "wrap", "plain")
                              for f in v.info.fields})
                if "*" in pre:
                    pre = sorted(m.model_fields)
                if pre:
                    before[title] = pre
                if any(v.info.mode in ("before", "wrap") for v in dec.model_validators.values()):
                    before_model.add(title)
            return js

    try:
        plain = cls.model_json_schema()
        js = cls.model_json_schema(schema_generator=Recording)
    except Exception as e:  # noqa: BLE001
        fail(fact, "%s.model_json_schema(): %s: %s" % (cls.__name__, type(e).__name__, e))
    if js != plain:
        fail(fact, "recording the extra behaviour changed the schema")
    return js, {"extra": dict(sorted(extra.items())), "before_validators": dict(sorted(before.items())),
                "before_model_validators": sorted(before_model)}


def source_of(cls, root):
    return os.path.relpath(sys.modules[cls.__module__].__file__, root)


def branches(prop):
    """A property's schema and the branches of its anyOf/oneOf."""
    out = [prop]
    for k in ("anyOf", "oneOf"):
        out += prop.get(k, [])
    return out


# How a field is told to take the provider's URL or its secret, from the
# schema: a secret is a SecretStr (format password, what pydantic emits for
# it) or, for classes that type it as a plain str, a field so named; a URL is
# a field of format uri (HttpUrl, AnyUrl) or so named. A host field (a name,
# not a URL) is not a URL field: an http(s) endpoint does not fit it.
SECRET_NAME = re.compile(r"^(api_key|api_token|token|password|access_token)$|_api_key$|_api_token$")
URL_NAME = re.compile(r"(^|_)(url|uri|base_url|endpoint)$")


def pick(props, fmt, name_re):
    """The one field of a format (preferred), else the one so named; the
    candidates when there is no single one."""
    by_fmt = sorted(n for n, p in props.items() if any(b.get("format") == fmt for b in branches(p)))
    if len(by_fmt) == 1:
        return by_fmt[0], by_fmt
    # a field typed None only (bedrock's auth_credential) takes nothing
    by_name = sorted(n for n, p in props.items() if name_re.search(n) and p.get("type") != "null")
    if len(by_name) == 1 and not by_fmt:
        return by_name[0], by_name
    return None, sorted(set(by_fmt) | set(by_name))


def field_facts(schema, cls):
    props = schema.get("properties", {})
    url, url_cands = pick(props, "uri", URL_NAME)
    secret, secret_cands = pick(props, "password", SECRET_NAME)
    return {
        "endpoint_field": url or "", "endpoint_candidates": url_cands,
        "secret_field": secret or "", "secret_candidates": secret_cands,
        "fields_source": "%s.model_fields (format uri/password, or the field name)" % cls.__name__,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    root = load_upstream(args.upstream)
    import pydantic

    stack = importlib.import_module(us.up("llama_stack.core.stack"))
    params = [p for p in inspect.signature(stack.Stack.__init__).parameters.values() if p.name != "self"]
    run_cls = params[0].annotation if params else None
    if isinstance(run_cls, str):
        run_cls = getattr(stack, run_cls, None)
    if not (isinstance(run_cls, type) and hasattr(run_cls, "model_json_schema")):
        fail("the run config model", "Stack.__init__'s first parameter is not annotated with a pydantic model")
    schema, modes = schema_of(run_cls, "the run config model %s" % run_cls.__name__)
    run_config = {"class": run_cls.__name__, "source": source_of(run_cls, root),
                  "evidence": us.up("llama_stack/core/stack.py") + " Stack.__init__(%s: %s)" % (params[0].name, run_cls.__name__),
                  "schema": schema, **modes}

    dist = importlib.import_module(us.up("llama_stack.core.distribution"))
    providers = {}
    for api, specs in sorted(dist.get_provider_registry().items(), key=lambda kv: kv[0].value):
        out = {}
        for ptype, spec in sorted(specs.items()):
            fact = "the config schema of %s provider %s (%s)" % (api.value, ptype, spec.config_class)
            if not spec.config_class:
                fail(fact, "no config_class")
            mod, name = spec.config_class.rsplit(".", 1)
            try:
                cls = getattr(importlib.import_module(mod), name)
            except Exception as e:  # noqa: BLE001
                fail(fact, "import: %s: %s" % (type(e).__name__, e))
            s, modes = schema_of(cls, fact)
            entry = {"class": cls.__name__, "config_class": spec.config_class, "source": source_of(cls, root),
                     "registry_source": us.up("llama_stack/providers/registry/%s.py" % api.value),
                     "schema": s, **modes}
            entry.update(field_facts(s, cls))
            out[ptype] = entry
        providers[api.value] = out

    json.dump({
        "upstream": "llamastack/llama-stack", "tag": args.tag,
        "generated_by": "hack/llamastack/derive_schemas.py (run by hack/llamastack/regenerate.sh); do not edit",
        "pydantic": pydantic.VERSION,
        "run_config": run_config, "providers": providers,
    }, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
