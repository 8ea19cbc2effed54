// Package runconfig turns an InferenceStack spec into a Llama Stack run
// configuration: the YAML the server reads, its SHA-256, and the environment
// variables (literal values and Secret references) the server container needs.
//
// The pipeline is pure: no Kubernetes client, no clock, no I/O beyond the
// distribution base configs embedded in the binary. The same spec always
// gives the same bytes.
//
// Steps, in order:
//  1. load the distribution's base config (or an empty one for a custom image);
//  2. overlay the user's providers by id (replace, append, keep the rest);
//  3. remove disabled APIs with their providers and every resource that
//     points at them;
//  4. register the user's models, shields and tool groups, replacing base
//     entries of the same id;
//  5. point the stores at the chosen backends (sqlite, redis, postgres, or the
//     operator-managed PostgreSQL of spec.cache);
//  6. write the server section (port, TLS files, Kubernetes authentication);
//  7. marshal deterministically and hash.
//
// Secrets never appear in the YAML: they are ${env.NAME} placeholders whose
// variables the returned Env fills from Secret keys.
package runconfig
