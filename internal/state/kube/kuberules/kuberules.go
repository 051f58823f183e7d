// Package kuberules holds the rules of the Kubernetes settings that the
// configuration (talon config validate), start-up (the kube store) and
// the bench harness all check, so that they give the same answer for
// every value (issue 50: kube-namespace "My_NS" passed config validation
// and was refused at start-up). It imports nothing of Talon's and no
// client library, so that the configuration links none; its test checks
// it against the API machinery's own rule.
package kuberules

import (
	"errors"
	"fmt"
)

// MaxNamespaceBytes bounds a namespace name (a DNS-1123 label).
const MaxNamespaceBytes = 63

// Namespace checks a namespace name: a DNS-1123 label, as the API server
// requires: 1 to MaxNamespaceBytes lowercase letters, digits and '-',
// starting and ending with a letter or digit. The error says what is
// wrong, without the value (the caller names the setting and the value).
func Namespace(ns string) error {
	switch {
	case ns == "":
		return errors.New("must be set")
	case len(ns) > MaxNamespaceBytes:
		return fmt.Errorf("must be a DNS-1123 label of at most %d characters, not %d", MaxNamespaceBytes, len(ns))
	case !alnum(ns[0]) || !alnum(ns[len(ns)-1]):
		return errors.New("must be a DNS-1123 label: start and end with a lowercase letter or digit")
	}
	for i := 0; i < len(ns); i++ {
		if c := ns[i]; !alnum(c) && c != '-' {
			return fmt.Errorf("must be a DNS-1123 label: lowercase letters, digits and '-' only, not %q", rune(c))
		}
	}
	return nil
}

// NamespacePrefix checks a prefix that a run extends with "-" and a
// suffix of suffixLen characters: the name made must be a namespace.
func NamespacePrefix(prefix string, suffixLen int) error {
	if limit := MaxNamespaceBytes - 1 - suffixLen; len(prefix) > limit {
		return fmt.Errorf("must be at most %d characters (the run adds a %d-character suffix), not %d", limit, 1+suffixLen, len(prefix))
	}
	return Namespace(prefix)
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
