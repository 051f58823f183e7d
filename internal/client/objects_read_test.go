package client

import (
	"errors"
	"fmt"
	"testing"

	"github.com/talonhq/talon/internal/datav1"
)

// answer is a worker's error answer of kind (as datav1 builds them from
// the HTTP status, which tests cannot set).
func answer(code string, kind error) error {
	return errors.Join(&datav1.Error{Code: code, Message: "x"}, kind)
}

// TestClassify: each kind of owner failure lands where decide looks for
// it, and the failures that may mean a moved owner drop the placement.
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name       string
		err        error
		invalidate bool
		want       attempt
	}{
		{"connection refused", errors.New("dial tcp: connection refused"), true, attempt{}},
		{"wrong owner", answer("wrong_owner", datav1.ErrWrongOwner), true, attempt{answered: 1}},
		{"not found", answer("not_found", datav1.ErrNotFound), false, attempt{answered: 1, notFound: 1}},
		{"range", answer("range_not_satisfiable", datav1.ErrRangeNotSatisfiable), false, attempt{answered: 1, notFound: 1}},
		{"worker unavailable", answer("unavailable", datav1.ErrUnavailable), false, attempt{answered: 1}},
		{"version changed", fmt.Errorf("w: %w", datav1.ErrVersionChanged), false, attempt{answered: 1, changed: true}},
		{"unverified", fmt.Errorf("%w: too few", ErrVerification), false, attempt{answered: 1}},
		{"disagreement", &disagreement{object: "o", sides: map[string][]string{"a": {"w1"}, "b": {"w2"}}}, false, attempt{answered: 1, disagreed: true}},
	} {
		var a attempt
		if got := a.classify("w1", tc.err); got != tc.invalidate {
			t.Errorf("%s: invalidate %t, want %t", tc.name, got, tc.invalidate)
		}
		if a.answered != tc.want.answered || a.notFound != tc.want.notFound || a.changed != tc.want.changed || a.disagreed != tc.want.disagreed || len(a.tried) != 1 {
			t.Errorf("%s: attempt %+v, want %+v", tc.name, a, tc.want)
		}
	}
}

// TestDecide: what a read does after a round no owner served.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a      attempt
		asked  int
		source bool
		want   action
	}{
		{"all failed to connect", attempt{}, 2, false, actRetry},
		{"all failed, with source", attempt{}, 2, true, actRetry},
		{"disagreement, no source", attempt{answered: 2, disagreed: true}, 2, false, actFailDisagree},
		{"disagreement, source", attempt{answered: 2, disagreed: true}, 2, true, actSource},
		{"changed, no source", attempt{answered: 1, changed: true}, 2, false, actFailChanged},
		{"changed, source", attempt{answered: 1, changed: true}, 2, true, actSource},
		{"every owner: not found", attempt{answered: 2, notFound: 2}, 2, false, actFailNotFound},
		{"every owner: not found, source", attempt{answered: 2, notFound: 2}, 2, true, actSource},
		{"one of two not found, one down", attempt{answered: 1, notFound: 1}, 2, false, actRetry},
		{"not found and wrong owner", attempt{answered: 2, notFound: 1}, 2, false, actRetry},
	} {
		if got := decide(&tc.a, tc.asked, tc.source); got != tc.want {
			t.Errorf("%s: decide = %d, want %d", tc.name, got, tc.want)
		}
	}
}
