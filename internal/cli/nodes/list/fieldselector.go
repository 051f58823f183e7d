package list

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/talonhq/talon/internal/apiv1"
	"github.com/talonhq/talon/internal/cli/cmdutil"
)

// Fields of --field-selector, named as the API's JSON fields.
const (
	FieldNodeID  = "nodeId"
	FieldRole    = "role"
	FieldHealth  = "health"
	FieldReady   = "ready"
	FieldVersion = "version"
	FieldAddress = "address"
)

// SelectableFields are the fields --field-selector accepts.
var SelectableFields = []string{FieldNodeID, FieldRole, FieldHealth, FieldReady, FieldVersion, FieldAddress}

// FieldSelectorHelp documents --field-selector.
var FieldSelectorHelp = "only nodes whose fields match `SELECTOR`: field=value, field==value, field!=value, comma-joined, all must match; fields: " +
	strings.Join(SelectableFields, ", ")

// nodeFields returns the selectable fields of n.
func nodeFields(n *apiv1.Node) fields.Set {
	return fields.Set{
		FieldNodeID:  n.NodeID,
		FieldRole:    n.Role,
		FieldHealth:  n.Health,
		FieldReady:   strconv.FormatBool(n.Ready),
		FieldVersion: n.Version,
		FieldAddress: n.Address,
	}
}

// ParseFieldSelector parses a --field-selector value with the Kubernetes
// parser (k8s.io/apimachinery/pkg/fields) and checks each field against
// SelectableFields and each value of role, health and ready against its
// allowed set. Errors are usage errors naming the flag, the value and the
// rule. The empty selector selects everything.
func ParseFieldSelector(s string) (fields.Selector, error) {
	sel, err := fields.ParseSelector(s)
	if err != nil {
		return nil, cmdutil.UsageErrorf("--field-selector %q: must be field=value, field==value or field!=value, comma-joined (%w)", s, err)
	}
	allowed := map[string][]string{FieldRole: roles(), FieldHealth: healthStates(), FieldReady: {"true", "false"}}
	for _, r := range sel.Requirements() {
		if !slices.Contains(SelectableFields, r.Field) {
			return nil, cmdutil.UsageErrorf("--field-selector %q: field %q is not supported; supported fields: %s", s, r.Field, strings.Join(SelectableFields, ", "))
		}
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals && r.Operator != selection.NotEquals {
			return nil, cmdutil.UsageErrorf("--field-selector %q: operator %q: must be =, == or !=", s, r.Operator)
		}
		if vals, ok := allowed[r.Field]; ok && !slices.Contains(vals, r.Value) {
			return nil, cmdutil.UsageErrorf("--field-selector %q: %s value %q: must be one of %s", s, r.Field, r.Value, strings.Join(vals, ", "))
		}
	}
	return sel, nil
}

// selectFields keeps the nodes sel matches, in order.
func selectFields(nodes []apiv1.Node, sel fields.Selector) []apiv1.Node {
	if sel == nil || sel.Empty() {
		return nodes
	}
	return slices.DeleteFunc(nodes, func(n apiv1.Node) bool { return !sel.Matches(nodeFields(&n)) })
}
