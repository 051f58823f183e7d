// Package config loads, validates and prints the configuration of the talon
// daemon for both roles.
//
// Precedence, lowest to highest: defaults < config file (YAML, --config) <
// environment (TALON_ prefix) < command-line flags. Every setting has one
// name used everywhere: the flag is --NAME, the config file key is NAME and
// the environment variable is TALON_NAME upper-cased with '-' as '_'
// (heartbeat-interval, --heartbeat-interval, TALON_HEARTBEAT_INTERVAL). The
// settings table in settings.go is the one place that holds names, defaults
// and help text.
//
// Secrets (the etcd password, the admin bearer tokens) are read only from an
// environment variable or from a file named by a setting; a config file or
// flag that tries to carry one is rejected. Secret values have the type
// Secret, whose every printing form is redacted.
//
// Loading never partially applies: Load returns a complete, validated
// Config or an error naming the setting, the value, where it came from and
// the rule it broke.
package config
