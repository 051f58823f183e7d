package cmdutil

import (
	"fmt"
	"github.com/talonhq/talon/internal/suggest"
	"regexp"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// SuggestionDistance is the largest edit distance at which a command or
// flag name is suggested for a mistyped one.
const SuggestionDistance = 2

// UnknownCommandError is the usage error of an argument of cmd, a
// command that only holds subcommands, that names none of them; it
// suggests the nearest subcommands (cobra's SuggestionsFor: edit distance
// or prefix).
func UnknownCommandError(cmd *cobra.Command, arg string) error {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = SuggestionDistance
	}
	err := &ExitError{Code: ExitUsage, Err: fmt.Errorf("unknown command %q for %q", arg, cmd.CommandPath())}
	err.Hint = didYouMean(nearest(arg, cmd.SuggestionsFor(arg)), "")
	return err
}

// unknownFlag matches pflag's error for an unknown long flag.
var unknownFlag = regexp.MustCompile(`^unknown flag: --([^\s=]+)$`)

// FlagError is the flag error function of every command: a usage error
// (exit 2), suggesting the nearest flag names for an unknown flag.
func FlagError(cmd *cobra.Command, err error) error {
	ee := &ExitError{Code: ExitUsage, Err: err}
	if m := unknownFlag.FindStringSubmatch(err.Error()); m != nil {
		ee.Hint = didYouMean(suggestFlags(cmd, m[1]), "--")
	}
	return ee
}

// suggestFlags returns the names of cmd's flags (its own and inherited)
// nearest to name: within SuggestionDistance, or that name (3 bytes or
// more) is a prefix of.
func suggestFlags(cmd *cobra.Command, name string) []string {
	var cands []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if Levenshtein(strings.ToLower(name), f.Name) <= SuggestionDistance || (len(name) >= 3 && strings.HasPrefix(f.Name, strings.ToLower(name))) {
			cands = append(cands, f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	return nearest(name, cands)
}

// nearest keeps the candidates at the smallest edit distance from typed,
// sorted by name.
func nearest(typed string, cands []string) []string {
	best := -1
	var out []string
	for _, c := range cands {
		switch d := Levenshtein(strings.ToLower(typed), strings.ToLower(c)); {
		case best < 0 || d < best:
			best, out = d, []string{c}
		case d == best && !slices.Contains(out, c):
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// didYouMean renders suggestions as a hint, each with prefix; "" for none.
func didYouMean(names []string, prefix string) string {
	if len(names) == 0 {
		return ""
	}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = fmt.Sprintf("%q", prefix+n)
	}
	if len(quoted) == 1 {
		return "did you mean " + quoted[0] + "?"
	}
	return "did you mean one of " + strings.Join(quoted, ", ") + "?"
}

// Levenshtein returns the edit distance between a and b (insertions,
// deletions and substitutions of bytes each cost 1).
func Levenshtein(a, b string) int { return suggest.Distance(a, b) }

// kubectlVerbs maps a kubectl habit (verb first) to talonctl's form (noun
// first); "%s" stands for the arguments that followed the verb, nouns
// dropped.
var kubectlVerbs = map[string]string{
	"get":      "nodes list",
	"describe": "nodes describe %s",
	"cordon":   "nodes cordon %s",
	"uncordon": "nodes uncordon %s",
	"drain":    "nodes drain %s",
	"explain":  "placement explain %s",
	"status":   "cluster status",
	"list":     "nodes list",
}

// kubectlNouns are the nouns a kubectl habit names after its verb.
var kubectlNouns = map[string]string{
	"node": "nodes", "nodes": "nodes", "no": "nodes",
	"coordinator": "coordinators", "coordinators": "coordinators",
	"event": "events", "events": "events", "ev": "events",
	"cluster": "cluster", "placement": "placement",
}

// VerbFirstError is the usage error of a kubectl habit at the root,
// `talonctl get nodes`: it names the talonctl command that does it
// (issue 38: such lines said only "unknown command"). It returns nil for
// anything else.
func VerbFirstError(root *cobra.Command, args []string) error {
	form, ok := kubectlVerbs[args[0]]
	if !ok {
		return nil
	}
	var rest []string
	noun := ""
	for _, a := range args[1:] {
		if n, isNoun := kubectlNouns[a]; isNoun && noun == "" {
			noun = n
			continue
		}
		rest = append(rest, a)
	}
	switch {
	case args[0] == "get" && noun == "coordinators":
		form = "coordinators list"
	case args[0] == "get" && noun == "events":
		form = "events"
	case args[0] == "get" && len(rest) > 0:
		form = "nodes get %s"
	}
	if strings.Contains(form, "%s") {
		form = strings.TrimSpace(fmt.Sprintf(form, strings.Join(rest, " ")))
	}
	err := &ExitError{Code: ExitUsage, Err: fmt.Errorf("unknown command %q for %q", args[0], root.CommandPath())}
	err.Hint = fmt.Sprintf("talonctl puts the noun first: try %q", root.CommandPath()+" "+form)
	return err
}
