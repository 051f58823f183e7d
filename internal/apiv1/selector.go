package apiv1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
)

// LabelSelectorRule describes the syntax of ParamLabelSelector, for
// error messages and help.
const LabelSelectorRule = "must be a Kubernetes label selector: key=value, key==value, key!=value, key in (a,b), key notin (a,b), key, !key; comma-joined, all must match"

// ParseLabelSelector parses a labelSelector with the Kubernetes parser
// (k8s.io/apimachinery/pkg/labels), so that the server and talonctl accept
// exactly the same selectors. The empty selector selects everything.
// Errors state the rule; the caller names the parameter or flag.
func ParseLabelSelector(s string) (labels.Selector, error) {
	if len(s) > MaxLabelSelectorBytes {
		return nil, fmt.Errorf("must be at most %d bytes", MaxLabelSelectorBytes)
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%s (%w)", LabelSelectorRule, err)
	}
	return sel, nil
}
