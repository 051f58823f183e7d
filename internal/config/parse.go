package config

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/talonhq/talon/internal/format"
)

// parsers holds the parser of every kind. Each converts a raw value (a
// string from flags and the environment, a YAML scalar, sequence or
// mapping from a file) into the kind's Go type, or says what the value
// must be.
var parsers = [...]func(raw any) (any, error){
	kindString:   parseString,
	kindDuration: parseDuration,
	kindInt:      parseInt,
	kindBool:     parseBool,
	kindList:     parseList,
	kindBytes:    parseBytes,
	kindMap:      parseMap,
}

// parse converts a raw value into the type of setting s.
func parse(s setting, raw any) (any, error) {
	return parsers[s.kind](raw)
}

// parseString accepts a string (trimmed) or a YAML scalar, which the file
// parser may have typed as a number or a boolean.
func parseString(raw any) (any, error) {
	switch v := raw.(type) {
	case string:
		return strings.TrimSpace(v), nil
	case int, int64, float64, bool:
		return fmt.Sprint(v), nil
	}
	return nil, errors.New("must be a string")
}

// durationSyntax is what time.ParseDuration reads.
var durationSyntax = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

// parseDuration accepts only a string with a unit: a bare YAML number is
// ambiguous.
func parseDuration(raw any) (any, error) {
	str, ok := raw.(string)
	str = strings.TrimSpace(str)
	d, err := time.ParseDuration(str)
	switch {
	case ok && err != nil && durationSyntax.MatchString(str):
		// Well formed, but past what a duration holds.
		return nil, fmt.Errorf("too large: a duration is at most %s", time.Duration(math.MaxInt64))
	case !ok || err != nil:
		return nil, errors.New("must be a duration with a unit, such as 500ms, 5s or 1m")
	case d < 0:
		return nil, errors.New("must not be negative")
	}
	return d, nil
}

func parseInt(raw any) (any, error) {
	switch v := raw.(type) {
	case int:
		return v, nil
	case int64:
		return int(v), nil
	case float64:
		if v == float64(int(v)) {
			return int(v), nil
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
			return n, nil
		}
	}
	return nil, errors.New("must be a whole number")
}

func parseBool(raw any) (any, error) {
	switch v := raw.(type) {
	case bool:
		return v, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(v)); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("must be true or false")
}

// parseBytes accepts a byte count or a size with a unit (4MiB, 10GB), at
// most 2^62 so that it fits an int64.
func parseBytes(raw any) (any, error) {
	switch v := raw.(type) {
	case int:
		return int64(v), nil
	case int64:
		return v, nil
	case string:
		if n, err := format.ParseBytes(strings.TrimSpace(v)); err == nil && n <= 1<<62 {
			return int64(n), nil
		}
	}
	return nil, errors.New("must be a size such as 4MiB, 10GiB or a byte count")
}

func parseList(raw any) (any, error) {
	items, err := listItems(raw)
	if err != nil {
		return nil, err
	}
	return items, nil
}

// listItems returns the items of a comma-separated string, of a repeated
// flag (each value comma-separated too) or of a YAML sequence of strings.
func listItems(raw any) ([]string, error) {
	var values []string
	switch v := raw.(type) {
	case string:
		values = []string{v}
	case []string:
		values = v
	case []any:
		for _, e := range v {
			str, ok := e.(string)
			if !ok {
				return nil, errors.New("must be a list of strings")
			}
			values = append(values, str)
		}
	default:
		return nil, errors.New("must be a list of strings")
	}
	var out []string
	for _, value := range values {
		out = append(out, splitList(value)...)
	}
	return out, nil
}

// parseMap accepts a YAML mapping, or key=value items in any form a list
// accepts. No value at all is an empty map.
func parseMap(raw any) (any, error) {
	switch v := raw.(type) {
	case nil:
		return map[string]string{}, nil
	case map[string]any:
		out := make(map[string]string, len(v))
		for key, val := range v {
			switch val.(type) {
			case string, int, int64, uint64, float64, bool:
				out[key] = fmt.Sprint(val) // YAML may have typed the value: rack: 12
			default:
				return nil, fmt.Errorf("value of %q must be a string, not %s", key, yamlKind(val))
			}
		}
		return out, nil
	case string, []string, []any:
		return keyValuePairs(v)
	}
	return nil, errors.New("must be a mapping of key: value")
}

// keyValuePairs parses list items of the form key=value into a map; a
// later item wins over an earlier one with the same key.
func keyValuePairs(raw any) (any, error) {
	items, err := listItems(raw)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, item := range items {
		key, val, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("entry %q must be key=value", item)
		}
		out[key] = val
	}
	return out, nil
}

// splitList splits a comma-separated list and drops empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// yamlKind names the YAML kind of a decoded value for messages.
func yamlKind(v any) string {
	switch v.(type) {
	case nil:
		return "empty"
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}
