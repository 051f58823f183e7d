package config

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/talonhq/talon/internal/cluster"
)

// rawValue is a flag that keeps what the user typed; Load parses it with
// the same rules as the file and the environment, so every source reports
// errors the same way.
type rawValue struct {
	kind   kind
	values []string
}

func (v *rawValue) String() string { return strings.Join(v.values, ",") }

func (v *rawValue) Set(s string) error {
	if v.kind == kindList || v.kind == kindMap {
		v.values = append(v.values, s)
	} else {
		v.values = []string{s}
	}
	return nil
}

func (v *rawValue) Type() string { return v.kind.String() }

func (v *rawValue) raw() any {
	if v.kind == kindList || v.kind == kindMap {
		return append([]string(nil), v.values...)
	}
	return v.String()
}

// RegisterFlags adds a flag for every non-secret setting of role, and the
// --config flag, to fs. Defaults are shown in help but applied by Load.
func RegisterFlags(fs *pflag.FlagSet, role cluster.Role) {
	fs.String("config", "", "YAML config file (keys are the flag names)")
	for _, s := range settings {
		if s.secret || !s.appliesTo(role) {
			continue
		}
		usage := s.usage + " (env " + envName(s.name) + ")"
		f := fs.VarPF(&rawValue{kind: s.kind}, s.flagName(), "", usage)
		f.DefValue = s.def(role)
		if s.helpDefault != "" {
			f.DefValue = s.helpDefault
		}
		if s.kind == kindBool {
			f.NoOptDefVal = "true"
		}
		registerAlias(fs, s)
	}
}

// registerAlias adds s's deprecated flag name, hidden from help; pflag
// prints a deprecation warning when it is used.
func registerAlias(fs *pflag.FlagSet, s setting) {
	if s.alias == "" || fs.Lookup(s.alias) != nil {
		return
	}
	fs.VarPF(&rawValue{kind: s.kind}, s.alias, "", s.usage)
	_ = fs.MarkDeprecated(s.alias, "use --"+s.name)
}

// FileFromFlags returns the --config value.
func FileFromFlags(fs *pflag.FlagSet) string {
	f := fs.Lookup("config")
	if f == nil {
		return ""
	}
	return f.Value.String()
}

// RegisterAllFlags adds a flag for every non-secret setting of either role
// (for commands such as `talon config print` that take a role argument).
// Help shows the coordinator's default where the roles differ.
func RegisterAllFlags(fs *pflag.FlagSet) {
	RegisterFlags(fs, cluster.RoleCoordinator)
	for _, s := range settings {
		if s.secret || s.appliesTo(cluster.RoleCoordinator) || !s.appliesTo(cluster.RoleWorker) {
			continue
		}
		f := fs.VarPF(&rawValue{kind: s.kind}, s.flagName(), "", s.usage+" (env "+envName(s.name)+")")
		f.DefValue = s.def(cluster.RoleWorker)
		if s.kind == kindBool {
			f.NoOptDefVal = "true"
		}
	}
}
