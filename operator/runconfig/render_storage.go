package runconfig

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/inferencestack/inferencestack/operator/api/v1alpha2"
	"github.com/inferencestack/inferencestack/operator/runconfig/stackconfig"
)

// The operator-managed PostgreSQL of spec.cache.
const (
	// CachePort is the PostgreSQL port of the cache Service.
	CachePort = 5432
	// CacheDatabase is the database the server uses.
	CacheDatabase = "llamastack"
	// CacheUser is the database user the server connects as.
	CacheUser = "llamastack"
	// CachePasswordKey is the key of the password in the cache Secret.
	CachePasswordKey = "password"
)

// Keys of the Secret ExternalSQLSecretName, which the controller fills from
// storage.sql.connectionString with PostgresSecretData.
const (
	SQLSecretHostKey     = "host"
	SQLSecretPortKey     = "port"
	SQLSecretDBKey       = "db"
	SQLSecretUserKey     = "user"
	SQLSecretPasswordKey = "password"
)

// CacheServiceName is the Service (and host name) of the operator-managed
// PostgreSQL of the InferenceStack named stack.
func CacheServiceName(stack string) string { return stack + "-cache" }

// CacheSecretName is the Secret holding the cache password (key
// CachePasswordKey); the controller creates it.
func CacheSecretName(stack string) string { return stack + "-cache" }

// ExternalSQLSecretName is the Secret the controller derives from the
// user's storage.sql.connectionString: Llama Stack's PostgreSQL stores take
// host, port, db, user and password apart, not a URI.
func ExternalSQLSecretName(stack string) string { return stack + "-sql" }

// PostgresSecretData splits a PostgreSQL URI
// (postgresql://user:password@host:port/db) into the keys of the
// ExternalSQLSecretName Secret. The port defaults to 5432.
func PostgresSecretData(uri string) (map[string]string, error) {
	u, err := url.Parse(strings.TrimSpace(uri))
	if err != nil {
		return nil, fmt.Errorf("connection string is not a URI: %w", err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("connection string must start with postgresql:// (got scheme %q)", u.Scheme)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return nil, fmt.Errorf("connection string names no host: use postgresql://user:password@host:port/db")
	}
	if port == "" {
		port = strconv.Itoa(CachePort)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return nil, fmt.Errorf("connection string names no database: use postgresql://user:password@host:port/db")
	}
	if u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("connection string names no user: use postgresql://user:password@host:port/db")
	}
	password, _ := u.User.Password()
	return map[string]string{
		SQLSecretHostKey: host, SQLSecretPortKey: port, SQLSecretDBKey: db,
		SQLSecretUserKey: u.User.Username(), SQLSecretPasswordKey: password,
	}, nil
}

func cacheEnabled(spec v1alpha2.InferenceStackSpec) bool {
	return spec.Cache != nil && spec.Cache.Enabled
}

// cacheEnv points the POSTGRES_* variables at the operator-managed
// PostgreSQL.
func cacheEnv(stack string, env *envSet) {
	origin := field.NewPath("spec", "cache", "enabled")
	// The names are fixed and added first, so these cannot clash.
	_, _ = env.value(EnvPostgresHost, CacheServiceName(stack), origin)
	_, _ = env.value(EnvPostgresPort, strconv.Itoa(CachePort), origin)
	_, _ = env.value(EnvPostgresDB, CacheDatabase, origin)
	_, _ = env.value(EnvPostgresUser, CacheUser, origin)
	_, _ = env.secret(EnvPostgresPassword, corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: CacheSecretName(stack)}, Key: CachePasswordKey,
	}, origin)
}

// externalSQLEnv points the POSTGRES_* variables at the Secret derived from
// storage.sql.connectionString.
func externalSQLEnv(stack string, env *envSet) {
	origin := field.NewPath("spec", "storage", "sql", "connectionString")
	ref := func(key string) corev1.SecretKeySelector {
		return corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ExternalSQLSecretName(stack)}, Key: key}
	}
	_, _ = env.secret(EnvPostgresHost, ref(SQLSecretHostKey), origin)
	_, _ = env.secret(EnvPostgresPort, ref(SQLSecretPortKey), origin)
	_, _ = env.secret(EnvPostgresDB, ref(SQLSecretDBKey), origin)
	_, _ = env.secret(EnvPostgresUser, ref(SQLSecretUserKey), origin)
	_, _ = env.secret(EnvPostgresPassword, ref(SQLSecretPasswordKey), origin)
}

func postgresStore() map[string]any {
	return map[string]any{
		"type":     "postgres",
		"host":     placeholder(EnvPostgresHost),
		"port":     placeholder(EnvPostgresPort),
		"db":       placeholder(EnvPostgresDB),
		"user":     placeholder(EnvPostgresUser),
		"password": placeholder(EnvPostgresPassword),
	}
}

// Store keys inside 0.2 provider configs that follow spec.storage.
const (
	kvProviderStore  = "persistence_store"
	sqlProviderStore = "responses_store"
)

// The 0.3 backends upstream's distributions name, which every store and
// provider refers to: moving one moves them all.
const (
	kvDefault  = "kv_default"
	sqlDefault = "sql_default"
)

// configureStorage points the key-value stores (registry, agent state,
// vector store metadata) and the SQL stores (inference, responses,
// conversations, files metadata) at the backends the spec selects, in the
// layout of the line, and checks that every PostgreSQL the config refers
// to gets its connection variables.
func configureStorage(cfg *runConfig, line stackconfig.Line, stack string, spec v1alpha2.InferenceStackSpec, env *envSet) error {
	var kv *v1alpha2.KVStoreSpec
	var sql *v1alpha2.SQLStoreSpec
	if spec.Storage != nil {
		kv, sql = spec.Storage.KV, spec.Storage.SQL
	}
	postgres := false
	switch {
	case sql != nil && sql.Type == v1alpha2.SQLStorePostgres:
		if cacheEnabled(spec) {
			return field.Forbidden(field.NewPath("spec", "cache", "enabled"),
				"cache.enabled runs an operator-managed PostgreSQL: remove it, or remove the external storage.sql postgres")
		}
		if sql.ConnectionString == nil {
			return field.Required(field.NewPath("spec", "storage", "sql", "connectionString"), "a postgres sql store needs the Secret key of its connection string")
		}
		externalSQLEnv(stack, env)
		postgres = true
	case cacheEnabled(spec):
		cacheEnv(stack, env)
		postgres = true
	}
	lay, err := layoutOf(line)
	if err != nil {
		return err
	}
	if err := lay.storage(cfg, kv, sql, postgres, env); err != nil {
		return err
	}
	if usesPostgresEnv(cfg, lay) && env.origin[EnvPostgresHost] == "" {
		return field.Required(field.NewPath("spec", "cache", "enabled"), fmt.Sprintf(
			"distribution %s keeps stores in PostgreSQL: set cache.enabled, or storage.sql of type postgres", cfg.ImageName))
	}
	return nil
}

// storage edits the inline stores of the InlineStores layout (0.2).
func (inlineStores) storage(cfg *runConfig, kv *v1alpha2.KVStoreSpec, sql *v1alpha2.SQLStoreSpec, postgres bool, env *envSet) error {
	if kv != nil {
		store, err := kvStore(kv, env)
		if err != nil {
			return err
		}
		cfg.MetadataStore = store("registry.db", "")
		eachProviderStore(cfg, kvProviderStore, store)
	}
	var sqlStore func(file, namespace string) map[string]any
	switch {
	case postgres:
		sqlStore = func(string, string) map[string]any { return postgresStore() }
	case sql != nil:
		sqlStore = func(file, _ string) map[string]any { return sqliteStore(file) }
	}
	if sqlStore != nil {
		cfg.InferenceStore = keepSQLite(cfg.InferenceStore, sqlStore("inference_store.db", ""))
		eachProviderStore(cfg, sqlProviderStore, sqlStore)
	}
	return nil
}

// storage edits the named backends of the StorageBackends layout (0.3):
// kv_default and sql_default, which every store and provider of upstream's
// distributions refers to.
func (storageBackends) storage(cfg *runConfig, kv *v1alpha2.KVStoreSpec, sql *v1alpha2.SQLStoreSpec, postgres bool, env *envSet) error {
	if cfg.Storage == nil || cfg.Storage.Backends[kvDefault] == nil || cfg.Storage.Backends[sqlDefault] == nil {
		// The embedded bases all have both; a base without them is a build defect.
		return fmt.Errorf("base config of %s has no %s and %s backends", cfg.ImageName, kvDefault, sqlDefault)
	}
	b := cfg.Storage.Backends
	if kv != nil {
		path := field.NewPath("spec", "storage", "kv")
		switch kv.Type {
		case v1alpha2.KVStoreRedis:
			if kv.Password != nil {
				return redisPasswordUnsupported(path.Child("password"))
			}
			host, port, err := redisEndpoint(path.Child("endpoint"), kv.Endpoint)
			if err != nil {
				return err
			}
			b[kvDefault] = map[string]any{"type": "kv_redis", "host": host, "port": int64(port)}
		case v1alpha2.KVStoreSQLite, "":
			if b[kvDefault]["type"] != "kv_sqlite" {
				b[kvDefault] = map[string]any{"type": "kv_sqlite", "db_path": sqlitePath("kvstore.db")}
			}
		default:
			return field.NotSupported(path.Child("type"), kv.Type, []v1alpha2.KVStoreType{v1alpha2.KVStoreSQLite, v1alpha2.KVStoreRedis})
		}
	}
	switch {
	case postgres:
		pg := postgresStore()
		pg["type"] = "sql_postgres"
		b[sqlDefault] = pg
	case sql != nil && b[sqlDefault]["type"] != "sql_sqlite":
		b[sqlDefault] = map[string]any{"type": "sql_sqlite", "db_path": sqlitePath("sql_store.db")}
	}
	return nil
}

// kvStore returns a maker of key-value store configs for storage.kv.
func kvStore(kv *v1alpha2.KVStoreSpec, env *envSet) (func(file, namespace string) map[string]any, error) {
	path := field.NewPath("spec", "storage", "kv")
	switch kv.Type {
	case v1alpha2.KVStoreRedis:
		host, port, err := redisEndpoint(path.Child("endpoint"), kv.Endpoint)
		if err != nil {
			return nil, err
		}
		if kv.Password != nil {
			return nil, redisPasswordUnsupported(path.Child("password"))
		}
		return func(_ string, namespace string) map[string]any {
			m := map[string]any{"type": "redis", "host": host, "port": int64(port)}
			if namespace != "" {
				m["namespace"] = namespace
			}
			return m
		}, nil
	case v1alpha2.KVStoreSQLite, "":
		return func(file, _ string) map[string]any { return sqliteStore(file) }, nil
	default:
		return nil, field.NotSupported(path.Child("type"), kv.Type, []v1alpha2.KVStoreType{v1alpha2.KVStoreSQLite, v1alpha2.KVStoreRedis})
	}
}

// redisPasswordUnsupported: Llama Stack's Redis key-value store takes a
// host and a port only (RedisKVStoreConfig at v0.2.23, v0.3.0, v0.7.1 and
// OGX's at v0.8.0).
func redisPasswordUnsupported(path *field.Path) error {
	return field.Forbidden(path, "Llama Stack's Redis key-value store takes no password (host and port only, "+
		"at v0.2.23, v0.3.0, v0.7.1 and OGX v0.8.0): remove it and use a Redis reachable without one, e.g. behind a NetworkPolicy")
}

// redisEndpoint splits storage.kv.endpoint into host and port.
func redisEndpoint(path *field.Path, endpoint string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(endpoint)
	if err != nil {
		return "", 0, field.Invalid(path, endpoint, "must be host:port")
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, field.Invalid(path, endpoint, "port must be 1-65535")
	}
	return host, port, nil
}

func sqliteStore(file string) map[string]any {
	return map[string]any{"type": "sqlite", "db_path": sqlitePath(file)}
}

// keepSQLite keeps an existing sqlite store (its file name) when the new
// store is sqlite too.
func keepSQLite(old, next map[string]any) map[string]any {
	if old["type"] == "sqlite" && next["type"] == "sqlite" {
		return old
	}
	return next
}

// eachProviderStore replaces the store under key in every provider config
// that has one, keeping an existing sqlite store as it is.
func eachProviderStore(cfg *runConfig, key string, store func(file, namespace string) map[string]any) {
	for _, api := range slices.Sorted(maps.Keys(cfg.Providers)) {
		for i := range cfg.Providers[api] {
			p := &cfg.Providers[api][i]
			old, ok := p.Config[key].(map[string]any)
			if !ok {
				continue
			}
			name := envName(api, p.ProviderID, key)
			p.Config[key] = keepSQLite(old, store(strings.ToLower(name)+".db", strings.ToLower(name)))
		}
	}
}

// usesPostgresEnv reports whether the config refers to the POSTGRES_*
// variables: whether a string of it holds the reference. The JSON form
// holds every string of the config (and escapes neither "$" nor "{"); it
// costs a fraction of the YAML form, which serves when a value has no
// JSON form.
func usesPostgresEnv(cfg *runConfig, lay layout) bool {
	data, err := json.Marshal(cfg)
	if err != nil {
		data, err = marshal(*cfg, lay)
	}
	return err == nil && strings.Contains(string(data), "${env."+EnvPostgresHost)
}
