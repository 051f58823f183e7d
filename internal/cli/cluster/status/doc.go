// Package status implements `talonctl cluster status`: one answer of a
// coordinator's /api/v1/cluster, as text (a key-value summary and the
// counts by role) or as the answer itself (-o json|yaml|jsonpath|...).
//
// Invariants: every figure shown is the server's (the cluster's totals,
// the coordinators present against expected), never computed here, so
// the text and -o jsonpath say the same; a stale answer is marked stale.
package status
