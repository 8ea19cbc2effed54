#!/usr/bin/env python3
"""Derive the facts the operator's Llama Stack model needs from an upstream
checkout at a tag, and write them as JSON (stdout) for
operator/runconfig/distributions/<tag>/facts.json.

    python3 hack/llamastack/derive_facts.py --upstream DIR --tag v0.3.0 > facts.json

Read from upstream's own code (imported, as upstream_startup.py does: missing
third-party modules are stand-ins, nothing of upstream is executed beyond
module import and the provider registry):
  * providers: every provider type of every API, from get_provider_registry()
    (llama_stack/providers/registry/<api>.py): api_dependencies,
    optional_api_dependencies, deprecation_error/_warning, config_class, and
    the config class's required fields with their annotated types;
  * config fields whose validator admits only upstream's own list (PERMITTED),
    with that list, and the models the providers whose implementation runs at
    start list (the default embedding model of 0.3's vector_stores);
  * the auto-routed APIs (core/distribution.py builtin_automatically_routed_apis)
    and the internal APIs the stack adds itself (INTERNAL_APIS);
  * the server's own stores (registry, prompts, conversations): the config key
    or the default path each lives at;
  * the server's own endpoints the operator reads for the live status (health,
    version, the providers list): route and method of each @webmethod at API
    level v1, whether the auth middleware demands a token there, the response
    model's fields (nested models too), the provider health values and the
    health a provider without a health check reports; and, for each routing
    table a later line drops (datasets, scoring functions, benchmarks), its
    list endpoint and how its answer names each resource (resource_lists),
    which the operator reads before a move names what it loses;
  * state_env: the environment variables that move a path the server
    writes (run.yaml ${env.X:=<path>} defaults, config_dirs.py);
  * start-up rules that are code, not models: each names its upstream file and
    the exact message; the script refuses to write the facts if a message is not
    in that file at this tag, so a new line is a regeneration plus review.
"""

import argparse
import importlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import upstream_startup as us  # noqa: E402
from upstream_startup import up  # noqa: E402
from derive_schemas import load_upstream  # noqa: E402

# Start-up rules read from upstream's code: (id, file, message, what). A rule
# holds at a tag when its message is in its file there (a rule of a later line,
# such as 0.3's storage.stores, is absent from 0.2's code); the facts list the
# rules found absent, for review.
RULES = [
    ("stores.metadata", "llama_stack/core/stack.py",
     "storage.stores.metadata must be configured with a kv_* backend",
     "Stack.initialize refuses a config without storage.stores.metadata"),
    ("stores.conversations", "llama_stack/core/conversations/conversations.py",
     "storage.stores.conversations must be configured in run config",
     "the conversations service (always started) refuses a config without storage.stores.conversations"),
    ("config.distro_name", "llama_stack/core/datatypes.py",
     "Either 'distro_name' or 'image_name' must be provided",
     "StackConfig.validate_distro_name_migration: a config names its distribution (distro_name; image_name deprecated)"),
    ("stores.prompts", "llama_stack/core/prompts/prompts.py",
     "storage.stores.prompts must be configured in run config",
     "the prompts service (always started) refuses a config whose storage.stores.prompts is null"),
    ("stores.connectors", "llama_stack/core/connectors/connectors.py",
     "storage.stores.connectors must be configured in config",
     "the connectors service (always started) refuses a config whose storage.stores.connectors is null"),
    ("stores.conversations.enabled", "llama_stack/core/conversations/conversations.py",
     'raise ServiceNotEnabledError("storage.stores.conversations")',
     "the conversations service (always started) refuses a config whose storage.stores.conversations is null "
     "(Service 'storage.stores.conversations' is not enabled)"),
    ("vector_stores.reranker", "llama_stack/core/stack.py",
     "not found. Available reranker models",
     "validate_vector_stores_config: the default reranker model must be a rerank model the models routing table holds"),
    ("config.version", "llama_stack/core/configure.py",
     "if version == LLAMA_STACK_RUN_CONFIG_VERSION:",
     "parse_and_maybe_upgrade_config: a config of another version goes through the upgrade of pre-2 files "
     "(later tags overwrite version with 2)"),
    ("stores.inference", "llama_stack/core/routers/__init__.py",
     "storage.stores.inference must be configured in run config",
     "the inference router refuses a config without storage.stores.inference"),
    ("vector_stores.models", "llama_stack/core/stack.py",
     "Models API is not available but vector_stores config requires model",
     "validate_vector_stores_config: a default embedding model needs the models API (inference) served"),
    ("vector_stores.model", "llama_stack/core/stack.py",
     "not found. Available embedding models",
     "validate_vector_stores_config: the default embedding model must be an embedding model a provider that is on lists"),
    ("resource.provider_all", "llama_stack/core/stack.py",
     'if obj.provider_id == "all":',
     "register_resources: a model with provider_id all is registered (an alias on the first inference provider "
     "that is on, failures logged); another resource with it is skipped"),
    ("safety.shields_api", "llama_stack/core/stack.py",
     "Safety configuration requires the shields API to be enabled",
     "validate_safety_config: a safety.default_shield_id needs the shields routing table served"),
    ("safety.safety_api", "llama_stack/core/stack.py",
     "Safety configuration requires the safety API to be enabled",
     "validate_safety_config: a safety.default_shield_id needs the safety router served"),
    ("safety.default_shield", "llama_stack/core/stack.py",
     "not found among registered shields.",
     "validate_safety_config: a safety.default_shield_id must be a shield registered at start, unless none is"),
    ("external_providers_dir.exists", "llama_stack/core/distribution.py",
     "External providers directory not found",
     "get_external_providers_from_dir: a set external_providers_dir must exist (only `llama stack run` creates it; "
     "a server started by uvicorn with the app factory does not)"),
    ("provider.unknown", "llama_stack/core/resolver.py",
     "is not available for API",
     "validate_provider: Provider `<type>` is not available for API `Api.<api>`"),
    ("provider.dependency", "llama_stack/core/resolver.py",
     "required dependency",
     "instantiate_providers: Failed to resolve '<api>' provider '<id>' of type '<type>': required dependency '<dep>' is not available"),
    ("resource.provider", "llama_stack/core/routing_tables/common.py",
     "not found",
     "register_object: Provider `<id>` not found (a resource naming a provider that is not enabled)"),
]

# Paths the server writes that the run config does not name, and the
# server's own stores (what a restarted server reads back): each holds at a
# tag when its evidence is in its source there. A store is where the config
# names it ("config": the key) or, when that is unset or there is none,
# upstream's default ("default", a path in the terms of implicit_writes);
# "namespace"/"table" are what upstream's code fixes for it. Of each store
# the evidence of exactly one placing must hold, or the script stops naming
# the store (a new line is a review).
IMPLICIT = [
    {"what": "prompts store (sqlite)", "path": "${LLAMA_STACK_CONFIG_DIR}/distributions/${image_name}/prompts.db",
     "when": "always", "source": "llama_stack/core/prompts/prompts.py", "evidence": "prompts.db"},
    {"what": "registry kvstore (sqlite)", "path": "${LLAMA_STACK_CONFIG_DIR}/distributions/${image_name}/kvstore.db",
     "when": "metadata_store unset", "source": "llama_stack/core/store/registry.py", "evidence": "kvstore.db"},
    {"what": "external providers folder", "path": "${external_providers_dir}",
     "when": "always (the string None when unset, relative to the working directory)",
     "source": "llama_stack/cli/stack/run.py",
     "evidence": "os.makedirs(str(config.external_providers_dir)",
     # 0.4 on makes it only when set
     "unless": "if config.external_providers_dir and not os.path.exists(str(config.external_providers_dir)):"},
    {"what": "external providers folder", "path": "${external_providers_dir}",
     "when": "external_providers_dir set", "only_when_set": True,
     "source": "llama_stack/cli/stack/run.py",
     "evidence": "if config.external_providers_dir and not os.path.exists(str(config.external_providers_dir)):"},
]
SERVER_STORES = [
    {"store": "registry", "kind": "kv", "config": "metadata_store",
     "default": "${LLAMA_STACK_CONFIG_DIR}/distributions/${image_name}/kvstore.db",
     "source": "llama_stack/core/store/registry.py", "evidence": 'DISTRIBS_BASE_DIR / image_name / "kvstore.db"'},
    {"store": "registry", "kind": "kv", "config": "storage.stores.metadata",
     "source": "llama_stack/core/stack.py", "evidence": "create_dist_registry(stores.metadata"},
    {"store": "prompts", "kind": "kv", "config": "",
     "default": "${LLAMA_STACK_CONFIG_DIR}/distributions/${image_name}/prompts.db",
     "source": "llama_stack/core/prompts/prompts.py", "evidence": '"prompts.db"'},
    {"store": "prompts", "kind": "kv", "config": "storage.stores.metadata", "namespace": "prompts",
     "source": "llama_stack/core/prompts/prompts.py", "evidence": 'KVStoreReference(namespace="prompts", backend=metadata_ref.backend)'},
    {"store": "prompts", "kind": "kv", "config": "storage.stores.prompts",
     "source": "llama_stack/core/prompts/prompts.py", "evidence": "prompts_ref = self.stack_config.storage.stores.prompts"},
    {"store": "conversations", "kind": "sql", "config": "storage.stores.conversations", "table": "openai_conversations",
     "source": "llama_stack/core/conversations/conversations.py", "evidence": 'table="openai_conversations"'},
    # the chat-completion history: 0.3.0 hard-codes its table; 0.7 reads the
    # reference's table_name (its default: ServerStoresConfig, STORE_DEFAULTS)
    {"store": "inference", "kind": "sql", "config": "inference_store", "table": "chat_completions", "requires": "inference_store",
     "source": "llama_stack/providers/utils/inference/inference_store.py", "evidence": 'table="chat_completions"'},
    {"store": "inference", "kind": "sql", "config": "storage.stores.inference", "table": "chat_completions", "requires": "storage",
     "source": "llama_stack/providers/utils/inference/inference_store.py", "evidence": 'table="chat_completions"'},
    {"store": "inference", "kind": "sql", "config": "storage.stores.inference", "table_from_config": True,
     "source": "llama_stack/providers/utils/inference/inference_store.py", "evidence": "table=self.reference.table_name"},
    # the responses provider's stored responses (its config's persistence.responses)
    {"store": "responses", "kind": "sql", "config": "providers.<responses api>[].config.responses_store",
     "table": "openai_responses", "requires": "inference_store",
     "source": "llama_stack/providers/utils/responses/responses_store.py", "evidence": 'table="openai_responses"'},
    {"store": "responses", "kind": "sql", "config": "providers.<responses api>[].config.persistence.responses",
     "table": "openai_responses", "requires": "storage",
     "source": "llama_stack/providers/utils/responses/responses_store.py", "evidence": 'table="openai_responses"'},
    {"store": "responses", "kind": "sql", "config": "providers.<responses api>[].config.persistence.responses",
     "table_from_config": True,
     "source": "llama_stack/providers/utils/responses/responses_store.py", "evidence": "table=self.reference.table_name"},
]
# The default table or namespace of a store whose table_from_config holds:
# the default of the reference model's field (class, field of the class
# holding the store references, the reference's field).
STORE_DEFAULTS = {
    "inference": ("llama_stack.core.storage.datatypes", "ServerStoresConfig", "inference", "table_name"),
    "responses": ("llama_stack.core.storage.datatypes", "ResponsesStoreReference", None, "table_name"),
}
# The distributions' own names (what upstream's shipped configs set), read
# from each config: store -> the config path of its table.
STORE_NAMED_BY = {
    "inference": ("storage", "stores", "inference", "table_name"),
    "responses": ("providers", "<responses api>", 0, "config", "persistence", "responses", "table_name"),
}
# Stores every line has (conversations arrived in 0.3).
REQUIRED_STORES = ("registry", "prompts")
# The stores of what clients asked and were answered (chat completions,
# responses): facts.json "history_stores", apart from the server's own
# stores ("server_stores": what its start-up places and reads back).
HISTORY_STORES = ("inference", "responses")
# Stores some lines have; at most one placing may hold.
OPTIONAL_STORES = ("conversations", "inference", "responses")
# How `llama stack run` starts the server, and what a command line that calls
# uvicorn itself must repeat to behave the same: read from cli/stack/run.py
# and core/server/server.py at the tag (derive_launch).
RUN_PY = "llama_stack/cli/stack/run.py"
SERVER_PY = "llama_stack/core/server/server.py"
CONFIG_DIRS = "llama_stack/core/utils/config_dirs.py"


# Config fields whose validator admits only values from upstream's own list:
# (api, provider type, field, file of the validator, evidence in that file,
# module and function that give the list).
PERMITTED = [
    ("inference", "inline::meta-reference", "model",
     "llama_stack/providers/inline/inference/meta_reference/config.py", "Unknown model: `{model}`",
     "llama_stack.providers.utils.inference", "supported_inference_models"),
]


# The server's endpoints the operator's live status reads: (name, module,
# protocol class, method). What the auth middleware does with each:
# AUTH_EXEMPTION names the file whose code honours require_authentication
# (absent there at a tag: every path needs a token).
SERVER_API = [
    ("health", "llama_stack.apis.inspect.inspect", "Inspect", "health"),
    ("version", "llama_stack.apis.inspect.inspect", "Inspect", "version"),
    ("list_providers", "llama_stack.apis.providers.providers", "Providers", "list_providers"),
]
# From 0.4 on (FastAPI routers): (name, folder under <pkg>_api, route, function).
SERVER_API_ROUTES = [
    ("health", "inspect_api", "/health", "health"),
    ("version", "inspect_api", "/version", "version"),
    ("list_providers", "providers", "/providers", "list_providers"),
]
# The list endpoints of the routing tables a later line drops (0.8.0 has no
# datasets, scoring_functions, benchmarks): what clients registered through
# the server's API, which a move to that line loses, is read there by name.
# (routing table, endpoint name, module, protocol class, method) up to 0.3;
# from 0.4 on (routing table, endpoint name, folder under <pkg>_api, route,
# function). Derived where the tag routes the table.
RESOURCE_LISTS = [
    ("datasets", "list_datasets", "llama_stack.apis.datasets.datasets", "Datasets", "list_datasets"),
    ("scoring_functions", "list_scoring_functions", "llama_stack.apis.scoring_functions.scoring_functions",
     "ScoringFunctions", "list_scoring_functions"),
    ("benchmarks", "list_benchmarks", "llama_stack.apis.benchmarks.benchmarks", "Benchmarks", "list_benchmarks"),
]
RESOURCE_LIST_ROUTES = [
    ("datasets", "list_datasets", "datasets", "/datasets", "list_datasets"),
    ("scoring_functions", "list_scoring_functions", "scoring_functions", "/scoring-functions", "list_scoring_functions"),
    ("benchmarks", "list_benchmarks", "benchmarks", "/eval/benchmarks", "list_benchmarks"),
]
AUTH_MIDDLEWARE = "llama_stack/core/server/auth.py"
ROUTES = ("llama_stack/core/server/routes.py", "path = f\"/{webmethod.level}/{webmethod.route.lstrip('/')}\"")
HEALTH = {"source": "llama_stack/core/providers.py", "evidence": "Provider does not implement health check"}


def short_type(ann):
    """A type annotation without module prefixes: list[ProviderInfo]."""
    import re
    s = ann.__name__ if isinstance(ann, type) and not getattr(ann, "__args__", None) else str(ann)
    return re.sub(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*)", r"\1", s.replace("typing.", ""))


def model_facts(cls, models, root):
    """Records cls's fields (and those of the models they hold) in models."""
    import typing
    if cls.__name__ in models:
        return
    fields = {}
    models[cls.__name__] = {"fields": fields, "source": os.path.relpath(sys.modules[cls.__module__].__file__, root)}
    for name, f in cls.model_fields.items():
        fields[name] = short_type(f.annotation)
        for t in (f.annotation, *typing.get_args(f.annotation)):
            if isinstance(t, type) and hasattr(t, "model_fields"):
                model_facts(t, models, root)


def resource_list(table, endpoint, ret, root, tag):
    """How a list endpoint's answer names its resources: the field holding
    the list of Resources, their identifier field, and the registry type
    they carry (the item's type default, upstream's ResourceType)."""
    import typing
    for field, f in ret.model_fields.items():
        args = typing.get_args(f.annotation)
        if typing.get_origin(f.annotation) is list and args and "identifier" in getattr(args[0], "model_fields", {}):
            item = args[0]
            rtype = item.model_fields["type"].default if "type" in item.model_fields else None
            rtype = getattr(rtype, "value", rtype)
            if not isinstance(rtype, str):
                sys.exit("%s at %s: %s has no registry type default: review" % (endpoint, tag, item.__name__))
            return {"routing_table": table, "endpoint": endpoint, "list_field": field, "item": item.__name__,
                    "identifier_field": "identifier", "registry_type": rtype,
                    "source": os.path.relpath(sys.modules[ret.__module__].__file__, root)}
    sys.exit("%s at %s: %s holds no list of resources: review" % (endpoint, tag, ret.__name__))


def server_api(root, tag, tables):
    import inspect as pyinspect
    if os.path.isdir(os.path.join(root, up("llama_stack_api"))):
        endpoints, models, lists = server_api_routes(root, tag, tables)
        return {"endpoints": endpoints, "models": models, "health": health_fact(root, tag), "resource_lists": lists}
    with open(os.path.join(root, ROUTES[0])) as f:
        if ROUTES[1] not in f.read():
            sys.exit("%r is not in %s at %s: review how routes are made" % (ROUTES[1], ROUTES[0], tag))
    with open(os.path.join(root, AUTH_MIDDLEWARE)) as f:
        exempts = "require_authentication is False" in f.read()
    endpoints, models, lists = [], {}, []
    wanted = [(None,) + e for e in SERVER_API] + [e for e in RESOURCE_LISTS if e[0] in tables]
    for table, name, module, cls, method in wanted:
        mod = importlib.import_module(module)
        func = getattr(getattr(mod, cls), method)
        (wm,) = [w for w in getattr(func, "__webmethods__", [func.__webmethod__]) if w.level == "v1"]
        ret = pyinspect.signature(func).return_annotation
        model_facts(ret, models, root)
        endpoints.append({
            "name": name, "method": wm.method, "path": "/%s/%s" % (wm.level, wm.route.lstrip("/")),
            "requires_authentication": not (exempts and getattr(wm, "require_authentication", True) is False),
            "required_scope": wm.required_scope or "",
            "response": ret.__name__,
            "source": os.path.relpath(mod.__file__, root),
            "auth_source": AUTH_MIDDLEWARE,
        })
        if table:
            lists.append(resource_list(table, name, ret, root, tag))
    return {"endpoints": endpoints, "models": models, "health": health_fact(root, tag), "resource_lists": lists}


def health_fact(root, tag):
    """HealthStatus (providers/datatypes.py, <pkg>_api/datatypes.py from 0.4
    on) and what a provider without a health check reports."""
    for name in ("llama_stack.providers.datatypes", "llama_stack_api.datatypes"):
        try:
            dt = importlib.import_module(up(name))
        except ImportError:
            continue
        if hasattr(dt, "HealthStatus"):
            break
    else:
        sys.exit("no HealthStatus at %s: review" % tag)
    src = up(HEALTH["source"])
    with open(os.path.join(root, src)) as f:
        if HEALTH["evidence"] not in f.read():
            sys.exit("%r is not in %s at %s: review" % (HEALTH["evidence"], src, tag))
    return {
        "statuses": [s.value for s in dt.HealthStatus], "error": dt.HealthStatus.ERROR.value,
        "not_implemented": dt.HealthStatus.NOT_IMPLEMENTED.value,
        "not_implemented_message": HEALTH["evidence"],
        "source": os.path.relpath(dt.__file__, root), "default_source": src,
    }


def permitted_values(module, func):
    """The descriptors and Hugging Face repos the validator admits (it reads
    both: meta_reference/config.py validate_model)."""
    models = getattr(importlib.import_module(module), func)()
    return sorted({m.descriptor() for m in models} | {m.huggingface_repo for m in models if m.huggingface_repo})


def listed_models(spec):
    """The models a provider whose own implementation runs at start
    (upstream_startup.REAL_PROVIDERS) lists: the routing table registers them
    at start, so vector_stores.default_embedding_model may name them."""
    import asyncio

    mod = importlib.import_module(spec.module)
    cm, cn = spec.config_class.rsplit(".", 1)
    impl = asyncio.run(mod.get_provider_impl(getattr(importlib.import_module(cm), cn)(), {}))
    impl.__provider_id__ = "provider"
    out = []
    for m in asyncio.run(impl.list_models()) or []:
        e = {"provider_resource_id": m.provider_resource_id, "model_type": str(getattr(m.model_type, "value", m.model_type))}
        if "embedding_dimension" in (m.metadata or {}):
            e["embedding_dimension"] = int(m.metadata["embedding_dimension"])
        out.append(e)
    return out


def derive_env_expansion(root):
    """What replace_env_vars (core/stack.py) does besides substituting: from
    0.4 on it switches server.auth off when its provider_config.type
    expands to nothing, and drops a list element whose id field
    (RESOURCE_ID_FIELDS) expands to nothing."""
    src = up("llama_stack/core/stack.py")
    text = read(root, src, "env_expansion")
    body = text[text.find("\ndef replace_env_vars("):]
    body = body[:body.find("\ndef ", 1)]
    if not body:
        underived("env_expansion", "no replace_env_vars in %s" % src)
    auth_off = 'if "provider_config" in config and path == "server.auth":' in body and \
        'result["provider_config"] = None' in body
    ids = []
    if "for id_field in RESOURCE_ID_FIELDS:" in body:
        ids = list(getattr(importlib.import_module(up("llama_stack.core.stack")), "RESOURCE_ID_FIELDS"))
    return {"auth_off_when_type_empty": auth_off, "skip_empty_id_fields": ids, "source": src + " replace_env_vars"}


STORAGE_DEFAULTS_EVIDENCE = 'base_dir = os.path.expanduser(os.environ.get("SQLITE_STORE_DIR") or str(DISTRIBS_BASE_DIR))'


def derive_storage_defaults(root, config_dir):
    """The storage backends a config without storage.backends gets (0.4 on:
    StorageConfig's default_factory _default_backends, core/storage/datatypes.py):
    each path in terms of base, which is $SQLITE_STORE_DIR or the config
    folder's distributions/. Absent ({}) where storage is required (0.3)."""
    src = up("llama_stack/core/storage/datatypes.py")
    text = read(root, src, "storage_defaults", optional=True)
    if STORAGE_DEFAULTS_EVIDENCE not in text or "default_factory=_default_backends" not in text:
        return {}
    mod = importlib.import_module(up("llama_stack.core.storage.datatypes"))
    saved = os.environ.pop("SQLITE_STORE_DIR", None)
    try:
        backends = mod._default_backends()
    finally:
        if saved is not None:
            os.environ["SQLITE_STORE_DIR"] = saved
    dirs = importlib.import_module(up("llama_stack.core.utils.config_dirs"))
    base = str(mod.DISTRIBS_BASE_DIR)
    cfg = str(getattr(dirs, config_dir["env"]))
    if not base.startswith(cfg):
        underived("storage_defaults.base", "%s is not under the config folder %s" % (base, cfg))
    out = {}
    for name, b in sorted(backends.items()):
        d = b.model_dump(mode="json", exclude_defaults=True)
        d["type"] = b.type.value if hasattr(b.type, "value") else str(b.type)
        if "db_path" in d:
            if not d["db_path"].startswith(base + "/"):
                underived("storage_defaults." + name, "%s is not under %s" % (d["db_path"], base))
            d["db_path"] = "${base}" + d["db_path"][len(base):]
        out[name] = d
    return {"backends": out, "base_env": "SQLITE_STORE_DIR",
            "base_default": "${%s}%s" % (config_dir["env"], base[len(cfg):]),
            "source": src + " _default_backends", "evidence": STORAGE_DEFAULTS_EVIDENCE}


def run_config_fields():
    """The top-level fields of the class Stack.__init__ takes (as
    derive_schemas.py reads it)."""
    import inspect

    stack = importlib.import_module(up("llama_stack.core.stack"))
    params = [p for p in inspect.signature(stack.Stack.__init__).parameters.values() if p.name != "self"]
    cls = params[0].annotation
    if isinstance(cls, str):
        cls = getattr(stack, cls)
    return set(cls.model_fields)


def type_name(ann):
    s = getattr(ann, "__name__", None) if isinstance(ann, type) else None
    return s or str(ann).replace("typing.", "")


# The facts that could not be derived at the tag: the script names them all,
# then stops without writing.
UNDERIVED = []


def underived(fact, why):
    UNDERIVED.append("%s: %s" % (fact, why))


def read(root, rel, fact, optional=False):
    """An upstream file's text; "" when optional and missing (a fact that
    holds when its evidence is in the file does not hold then)."""
    try:
        with open(os.path.join(root, rel)) as f:
            return f.read()
    except OSError as e:
        if not optional:
            underived(fact, str(e))
        return ""


class _NoMatch:
    def group(self, i=0):
        return ""


def found(fact, pattern, text, where):
    m = re.search(pattern, text, re.S)
    if m is None:
        underived(fact, "%r is not in %s" % (pattern, where))
        return _NoMatch()
    return m


def derive_launch(root):
    """The launch contract, from cli/stack/run.py and core/server/server.py:
    the options of `llama stack run`, the app factory and the variable it
    reads the config path from, and the uvicorn settings of whichever file
    runs uvicorn (server.py's main at 0.2, run.py from 0.3)."""
    RUN_PY, SERVER_PY = up(globals()["RUN_PY"]), up(globals()["SERVER_PY"])
    run, server = read(root, RUN_PY, "launch.run"), read(root, SERVER_PY, "launch.app")
    options = sorted(set(re.findall(r'add_argument\(\s*"(--[a-z][a-z0-9-]*)"', run)))
    if "--port" not in options:
        underived("launch.run.options", "no --port option in %s" % RUN_PY)
    found("launch.app.factory", r"\ndef create_app\(", server, SERVER_PY)
    body = server[server.find("\ndef create_app("):]
    cfg = found("launch.app.config_env", r'os\.getenv\("([A-Z_]*CONFIG)"\)', body, SERVER_PY + " create_app")
    factory = os.path.splitext(SERVER_PY)[0].replace("/", ".") + ":create_app"
    # uvicorn is configured where the TLS client-certificate policy is set
    usrc = [f for f, t in ((RUN_PY, run), (SERVER_PY, server)) if "ssl_cert_reqs" in t]
    if len(usrc) != 1:
        underived("launch.uvicorn.source", "ssl_cert_reqs is set in %s" % (usrc or "neither file"))
        usrc = [RUN_PY]
    utext = run if usrc[0] == RUN_PY else server
    port = found("launch.uvicorn.port_env", r'os\.getenv\("([A-Z_]+_PORT)", (\d+)\)', run, RUN_PY)
    # `args.port or config.server.port`: server.port is read only when --port has no default
    port_arg = found("launch.uvicorn.reads_server_port", r'add_argument\(\s*"--port".*?\)\n', run, RUN_PY).group(0)
    # 0.2/0.3: `config.server.host or ["::", "0.0.0.0"]`; 0.7: `host = ""`
    # (uvicorn binds every address) unless server.host is set
    hosts = re.search(r"config\.server\.host or \[([^\]]*)\]", utext) or \
        found("launch.uvicorn.default_hosts", r'host = ("[^"]*")\n\s*if config\.server\.host:', utext, usrc[0])
    lifespan = found("launch.uvicorn.lifespan", r'"lifespan":\s*"(\w+)"', utext, usrc[0])
    certreq = found("launch.uvicorn.tls_client_cert", r'"ssl_cert_reqs"\]\s*=\s*ssl\.(CERT_[A-Z]+)', utext, usrc[0])
    return {
        "run": {"source": RUN_PY, "options": options, "workers": "workers" in run,
                "evidence": 'add_argument("--...") in %s' % RUN_PY},
        "app": {"factory": factory, "config_env": cfg.group(1), "source": SERVER_PY, "evidence": cfg.group(0)},
        "uvicorn": {"source": usrc[0], "port_env": port.group(1), "default_port": int(port.group(2) or 0),
                    "reads_server_port": "default=" not in port_arg,
                    "default_hosts": [h.strip().strip('"') for h in hosts.group(1).split(",")],
                    "lifespan": lifespan.group(1), "tls_client_cert": certreq.group(1), "evidence": hosts.group(0)},
    }


def derive_config_dir(root):
    """Where the server keeps what a run config does not place (config_dirs.py:
    LLAMA_STACK_CONFIG_DIR, OGX_CONFIG_DIR at 0.8)."""
    m = found("config_dir", r'\n([A-Z_]+_CONFIG_DIR) = Path\(os\.getenv\("([A-Z_]+)", os\.path\.expanduser\("([^"]+)"\)\)\)',
              read(root, up(CONFIG_DIRS), "config_dir"), up(CONFIG_DIRS))
    out = {"default": m.group(3).rstrip("/"), "env": m.group(2), "source": up(CONFIG_DIRS)}
    # 0.8.0: the server's start moves the old folder (~/.llama) to the new
    # one when the variable is unset, the old one exists and the new one not
    text = read(root, up(CONFIG_DIRS), "config_dir")
    legacy = re.search(r'_LEGACY_CONFIG_DIR = Path\(os\.path\.expanduser\("([^"]+)"\)\)', text)
    moves = "shutil.move(str(_LEGACY_CONFIG_DIR), str(%s))" % m.group(1)
    unless = 'if os.getenv("%s"):\n        return' % m.group(2)
    if legacy and moves in text and unless in text:
        server = read(root, up(SERVER_PY), "config_dir.legacy")
        if "migrate_legacy_config_dir()" not in server:
            underived("config_dir.legacy", "%s does not call migrate_legacy_config_dir()" % up(SERVER_PY))
        out["legacy"] = {"path": legacy.group(1).rstrip("/"), "moved_unless_env_set": True, "evidence": moves,
                         "called_from": up(SERVER_PY) + " create_app"}
    return out


def derive_cli(root, checkout):
    """The command that starts the server (cli/stack/run.py's prog, e.g.
    `llama stack run`, `ogx stack run` at 0.8), its program checked against
    the console scripts of upstream's pyproject.toml."""
    run = read(root, up(RUN_PY), "cli")
    prog = found("cli.command", r'add_parser\(\s*"run",\s*prog="([a-z]+ stack run)"', run, up(RUN_PY)).group(1)
    argv = prog.split()
    scripts = read(checkout, "pyproject.toml", "cli.program")
    found("cli.program", r"\[project\.scripts\][^\[]*\n%s = \"%s\.cli\." % (re.escape(argv[0] if argv else "-"), us.PKG),
          scripts, "pyproject.toml [project.scripts]")
    return {"command": argv, "program": argv[0] if argv else "", "source": up(RUN_PY),
            "evidence": 'prog="%s"' % prog, "program_source": "pyproject.toml [project.scripts]"}


def derive_client_version_header(root):
    """The request header the server compares with its own version."""
    m = found("client_version_header", r'headers\.get\(b"(x-[a-z-]+-client-version)"', read(root, up(SERVER_PY), "client_version_header"),
              up(SERVER_PY))
    return {"name": m.group(1), "source": up(SERVER_PY), "evidence": m.group(0)}


BUILD_WORKFLOW = ".github/workflows/build-distributions.yml"
INSTALL_SCRIPT = "scripts/install.sh"
# An image name without a registry host is docker's default registry's.
DEFAULT_REGISTRY = "docker.io"


def derive_images(checkout):
    """The repository of the distribution images upstream publishes: its
    build-distributions workflow's IMAGE_PREFIX (an unqualified name:
    docker.io) and the distributions it builds (those with a build.yaml,
    but the ones it excludes); at tags without that workflow, the image
    scripts/install.sh runs (<prefix>-starter)."""
    wf = read(checkout, BUILD_WORKFLOW, "images", optional=True)
    if wf:
        prefix = found("images.prefix", r"\n\s*IMAGE_PREFIX: ([a-z0-9./_-]+)\n", wf, BUILD_WORKFLOW).group(1)
        where = found("images.distributions", r"find (\S+) -mindepth 2 -maxdepth 2 -name '\*build\.yaml'", wf, BUILD_WORKFLOW).group(1)
        excluded = re.findall(r"grep -v '\^([a-z0-9_-]+)\$'", wf)
        folder = os.path.join(checkout, where)
        dists = sorted(d for d in (os.listdir(folder) if os.path.isdir(folder) else [])
                       if os.path.isfile(os.path.join(folder, d, "build.yaml")) and d not in excluded)
        if not dists:
            underived("images.distributions", "no %s/*/build.yaml but %s" % (where, excluded))
        first = prefix.split("/")[0]
        registry = "" if "." in first or ":" in first else DEFAULT_REGISTRY + "/"
        return {"repository_prefix": registry + prefix + "-", "distributions": dists, "source": BUILD_WORKFLOW,
                "evidence": "IMAGE_PREFIX: %s; LOCAL_IMAGE_NAME=\"${IMAGE_PREFIX}-${DISTRO_NAME}:${IMAGE_TAG}\"; "
                            "%s/*/build.yaml but %s" % (prefix, where, ", ".join(excluded))}
    m = found("images.prefix", r'\nSERVER_IMAGE="([a-z0-9./_-]+-)starter:[^"]*"',
              read(checkout, INSTALL_SCRIPT, "images"), INSTALL_SCRIPT)
    return {"repository_prefix": m.group(1), "source": INSTALL_SCRIPT, "evidence": m.group(0).strip()}


def enum_fact(module_names, cls_name, root, fact):
    """The values of an upstream enum (Api, ResourceType), from the first
    module of module_names that has it."""
    for name in module_names:
        try:
            mod = importlib.import_module(up(name))
        except ImportError:
            continue
        e = getattr(mod, cls_name, None)
        if e is not None:
            return {"values": sorted(str(v.value) for v in e), "source": os.path.relpath(mod.__file__, root)}
    underived(fact, "no %s in %s" % (cls_name, ", ".join(up(n) for n in module_names)))
    return {}


# The PostgreSQL backends' defaults: (fact, modules that may hold the class,
# class, fields whose defaults are recorded).
POSTGRES = [
    ("kv", ("llama_stack.core.storage.datatypes", "llama_stack.providers.utils.kvstore.config"),
     "PostgresKVStoreConfig", ("db", "table_name")),
    ("sql", ("llama_stack.core.storage.datatypes", "llama_stack.providers.utils.sqlstore.sqlstore"),
     "PostgresSqlStoreConfig", ("db",)),
]


def derive_postgres_defaults(root):
    out = {}
    for kind, modules, cls_name, fields in POSTGRES:
        for name in modules:
            try:
                mod = importlib.import_module(up(name))
            except ImportError:
                continue
            cls = getattr(mod, cls_name, None)
            if cls is None:
                continue
            e = {"class": cls_name, "source": os.path.relpath(mod.__file__, root)}
            for f in fields:
                field = cls.model_fields.get(f)
                if field is None or field.is_required():
                    underived("postgres_defaults.%s.%s" % (kind, f), "%s.%s has no default" % (cls_name, f))
                    continue
                e[f] = field.default
            out[kind] = e
            break
        else:
            underived("postgres_defaults." + kind, "no %s in %s" % (cls_name, ", ".join(up(n) for n in modules)))
    return out


def store_default(store):
    """The default table of a store whose table comes from its config
    (STORE_DEFAULTS): the default of the reference model's field."""
    modname, cls_name, holder_field, field = STORE_DEFAULTS[store]
    mod = importlib.import_module(up(modname))
    cls = getattr(mod, cls_name)
    if holder_field:
        ref = cls.model_fields[holder_field].default
        value = getattr(ref, field, None)
    else:
        f = cls.model_fields[field]
        value = None if f.is_required() else f.default
    if not isinstance(value, str):
        underived("server_stores.%s.table" % store, "%s has no default %s" % (cls_name, field))
        return "", ""
    return value, "%s %s%s.%s" % (os.path.relpath(mod.__file__, ROOT), cls_name, "." + holder_field if holder_field else "", field)


def distribution_names(root, store, responses_api):
    """What upstream's shipped base configs name a store's table: config
    file -> table (STORE_NAMED_BY)."""
    import glob

    import yaml

    out = {}
    for f in distribution_configs(root):
        with open(f) as fh:
            v = yaml.safe_load(fh)
        for k in STORE_NAMED_BY[store]:
            k = responses_api if k == "<responses api>" else k
            if isinstance(k, int):
                v = v[k] if isinstance(v, list) and len(v) > k else None
            else:
                v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, str):
            out[os.path.relpath(f, root)] = v
    return out


def distribution_configs(root):
    """Upstream's distributions' base configs: <pkg>/distributions/*/run.yaml
    (config.yaml from 0.4 on)."""
    import glob

    for name in ("run.yaml", "config.yaml"):
        files = sorted(glob.glob(os.path.join(root, us.PKG, "distributions", "*", name)))
        if files:
            return files
    return []


def server_api_routes(root, tag, tables):
    """server_api from FastAPI routers (0.4 on: <pkg>_api/<api>/fastapi_routes.py,
    a route is public when its openapi_extra sets PUBLIC_ROUTE_KEY, which
    core/server/routes.py turns into require_authentication=False)."""
    routes_py = up(ROUTES[0])
    rtext = read(root, routes_py, "server_api.routes")
    found("server_api.public", r"require_authentication=not is_public", rtext, routes_py)
    endpoints, models, lists = [], {}, []
    wanted = [(None,) + e for e in SERVER_API_ROUTES] + [e for e in RESOURCE_LIST_ROUTES if e[0] in tables]
    for table, name, api_dir, route, func in wanted:
        rel = up("llama_stack_api/%s/fastapi_routes.py" % api_dir)
        text = read(root, rel, "server_api." + name)
        prefix = found("server_api.%s.prefix" % name, r'prefix=f"/\{([A-Z0-9_]+)\}"', text, rel).group(1)
        level = getattr(importlib.import_module(up("llama_stack_api.version")), prefix, None)
        m = found("server_api." + name, r'@router\.(get|post)\(\s*"%s",((?:(?!@router\.).)*?)\)\n\s*async def %s\((?:[^()]|\([^()]*\))*\) -> (\w+):'
                  % (re.escape(route), func), text, rel)
        if not m.group(0) or level is None:
            continue
        mod = importlib.import_module(up("llama_stack_api.%s.models" % api_dir))
        ret = getattr(mod, m.group(3))
        model_facts(ret, models, root)
        endpoints.append({
            "name": name, "method": m.group(1).upper(), "path": "/%s/%s" % (level, route.lstrip("/")),
            "requires_authentication": "PUBLIC_ROUTE_KEY: True" not in m.group(2),
            "required_scope": "",
            "response": ret.__name__, "source": rel, "auth_source": routes_py,
        })
        if table:
            lists.append(resource_list(table, name, ret, root, tag))
    return endpoints, models, lists


PLACEHOLDER = re.compile(r"\$\{env\.([A-Z0-9_]+):=([^}]*)\}")


def derive_state_env(root, config_dir, implicit):
    """The environment variables that move a path the server writes: every
    ${env.NAME:=DEFAULT} of upstream's distributions' run configs whose
    default is a path (~ or /), and the config folder's variable
    (config_dirs.py) when a path the config does not name lies under it."""
    import glob

    out = {}
    files = distribution_configs(root)
    if not files:
        underived("state_env", "no %s/distributions/*/run.yaml or config.yaml" % us.PKG)
    where = "%s/distributions/*/%s" % (us.PKG, os.path.basename(files[0]) if files else "run.yaml")
    for f in files:
        with open(f) as fh:
            for name, default in PLACEHOLDER.findall(fh.read()):
                # a path under the config folder's default is state the
                # server keeps (0.7's ~/.oci/config is a file it reads)
                if default.startswith(config_dir["default"]):
                    e = out.setdefault(name, {"env": name, "defaults": [], "source": where})
                    if default not in e["defaults"]:
                        e["defaults"].append(default)
    env = config_dir.get("env")
    if env and any("${%s}" % env in i["path"] for i in implicit):
        out[env] = {"env": env, "defaults": [config_dir["default"]], "source": config_dir["source"]}
    for e in out.values():
        e["defaults"].sort()
    return [out[k] for k in sorted(out)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--tag", required=True)
    args = ap.parse_args()
    global ROOT
    root = ROOT = load_upstream(args.upstream)
    dist = importlib.import_module(up("llama_stack.core.distribution"))
    reg = dist.get_provider_registry()

    providers = {}
    for api, specs in sorted(reg.items(), key=lambda kv: kv[0].value):
        out = {}
        for ptype, spec in sorted(specs.items()):
            entry = {
                "api_dependencies": sorted(a.value for a in spec.api_dependencies),
                "optional_api_dependencies": sorted(a.value for a in getattr(spec, "optional_api_dependencies", []) or []),
                "config_class": spec.config_class,
                "source": up("llama_stack/providers/registry/%s.py" % api.value),
            }
            if getattr(spec, "deprecation_error", None):
                entry["deprecation_error"] = spec.deprecation_error
            if getattr(spec, "deprecation_warning", None):
                entry["deprecation_warning"] = spec.deprecation_warning
            try:
                cls = importlib.import_module(spec.config_class.rsplit(".", 1)[0])
                cls = getattr(cls, spec.config_class.rsplit(".", 1)[1])
                fields = getattr(cls, "model_fields", {})
                entry["required_config"] = {n: type_name(f.annotation) for n, f in sorted(fields.items()) if f.is_required()}
            except Exception as e:  # the config module needs what is missing here
                entry["required_config_unknown"] = "%s: %s" % (type(e).__name__, e)
            for papi, pt, field, path, evidence, module, func in PERMITTED:
                if (papi, pt) != (api.value, ptype):
                    continue
                path, module = up(path), up(module)
                with open(os.path.join(root, path)) as f:
                    if evidence not in f.read():
                        sys.exit("%s %s: %r is not in %s at %s: review" % (pt, field, evidence, path, args.tag))
                entry.setdefault("permitted_config", {})[field] = {
                    "values": permitted_values(module, func), "message": evidence.split("`")[0].strip(), "source": path}
            if ptype in us.REAL_PROVIDERS.get(api.value, ()):
                entry["listed_models"] = listed_models(spec)
                entry["listed_models_source"] = spec.module.replace(".", "/") + " list_models"
            out[ptype] = entry
        providers[api.value] = out

    rules, absent = [], []
    config_dir = derive_config_dir(root)
    for rid, path, msg, what in RULES:
        path = up(path)
        if msg in read(root, path, "rule " + rid, optional=True):
            rules.append({"id": rid, "source": path, "message": msg, "what": what})
        else:
            absent.append({"id": rid, "source": path, "message": msg})
    run_fields = run_config_fields()
    # paths in the terms of the config folder's variable at the tag
    in_terms = lambda v: v.replace("${LLAMA_STACK_CONFIG_DIR}", "${%s}" % config_dir["env"]) if isinstance(v, str) else v
    implicit = [{k: in_terms(up(v) if k == "source" else v) for k, v in i.items()} for i in IMPLICIT]
    implicit = [i for i in implicit if i["evidence"] in read(root, i["source"], i["what"], optional=True)
                and i.get("unless", "\0") not in read(root, i["source"], i["what"], optional=True)]
    for i in implicit:
        i.pop("unless", None)
    stores = [{k: in_terms(up(v) if k == "source" else v) for k, v in st.items()} for st in SERVER_STORES]
    stores = [st for st in stores if st["evidence"] in read(root, st["source"], st["store"] + " store", optional=True)
              and st.get("requires", "") in run_fields | {""}]
    for name in REQUIRED_STORES + OPTIONAL_STORES:
        n = sum(st["store"] == name for st in stores)
        if n != 1 and (n or name in REQUIRED_STORES):
            underived("server_stores." + name, "the evidence of %d placings in SERVER_STORES holds" % n)
    api_values = enum_fact(("llama_stack_api.datatypes", "llama_stack.apis.datatypes"), "Api", root, "apis")
    responses_api = "responses" if "responses" in api_values.get("values", ()) else "agents"
    for st in stores:
        st.pop("requires", None)
        st["config"] = st["config"].replace("<responses api>", responses_api)
        if st.pop("table_from_config", False):
            st["table"], st["table_source"] = store_default(st["store"])
            st["table_from_config"] = True
            # what the shipped configs name it: honoured only where the
            # table comes from the config
            if st["store"] not in STORE_NAMED_BY:
                underived("server_stores.%s.distributions_name" % st["store"], "no STORE_NAMED_BY entry")
            else:
                st["distributions_name"] = distribution_names(root, st["store"], responses_api)
    launch = derive_launch(root)
    registry_source = up("llama_stack/core/store/registry.py")
    registry_key_version = found("registry_key.version", r'KEY_VERSION = "(v\d+)"',
                                 read(root, registry_source, "registry_key"), registry_source).group(1)
    models_source = up("llama_stack/core/routing_tables/models.py")
    models_text = read(root, models_source, "model_identifier")
    # provider_id/provider_model_id (0.2 to 0.7) or provider_id/model_id (0.8,
    # which keeps a model_id that already starts with provider_id/)
    ident = found("model_identifier", r'identifier = f"\{provider_id\}/\{(provider_model_id|model_id)\}"', models_text,
                  models_source).group(1)
    keeps_prefixed = re.search(r'if model_id\.startswith\(f"\{provider_id\}/"\):\s*identifier = model_id', models_text) is not None
    # register_model: whether a model_id other than the provider's id is the
    # model's identifier (an alias) or provider_id/provider_model_id is
    alias = re.search(r"if model_id != provider_model_id:\s*identifier = model_id", models_text) is not None
    state_env = derive_state_env(root, config_dir, implicit)
    extra = {
        "cli": derive_cli(root, args.upstream),
        "client_version_header": derive_client_version_header(root),
        "images": derive_images(args.upstream),
        "apis": api_values,
        "resource_types": enum_fact(("llama_stack_api.resource", "llama_stack.apis.resource"), "ResourceType", root,
                                    "resource_types"),
        "postgres_defaults": derive_postgres_defaults(root),
        "package": {"name": us.PKG, "source": up("llama_stack/core/stack.py")},
        "env_expansion": derive_env_expansion(root),
        "storage_defaults": derive_storage_defaults(root, config_dir),
        "server_api": server_api(root, args.tag, {i.routing_table_api.value for i in dist.builtin_automatically_routed_apis()}),
    }
    if UNDERIVED:
        sys.exit("derive_facts: at %s these facts could not be derived (review the script):\n  %s" % (args.tag, "\n  ".join(UNDERIVED)))

    facts = {
        "upstream": "llamastack/llama-stack",
        "tag": args.tag,
        "generated_by": "hack/llamastack/derive_facts.py",
        "routed_apis": [{"router": i.router_api.value, "routing_table": i.routing_table_api.value,
                         "source": up("llama_stack/core/distribution.py")}
                        for i in dist.builtin_automatically_routed_apis()],
        "internal_apis": sorted(a.value for a in getattr(dist, "INTERNAL_APIS", set())),
        "config_dir": config_dir,
        "state_env": state_env,
        "rules": rules,
        "absent_rules": absent,
        "implicit_writes": implicit,
        "server_stores": [st for st in stores if st["store"] not in HISTORY_STORES],
        "history_stores": [st for st in stores if st["store"] in HISTORY_STORES],
        "model_identifier": {"alias_when_renamed": alias, "suffix": ident, "keeps_prefixed": keeps_prefixed,
                             "source": models_source + " register_model"},
        "registry_key": {"version": registry_key_version, "source": registry_source,
                         "format": "distributions:registry:<version>::<type>:<identifier>"},
        "launch": launch,
        "providers": providers,
        **extra,
    }
    json.dump(facts, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
