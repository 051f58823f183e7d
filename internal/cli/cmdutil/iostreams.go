package cmdutil

import (
	"io"
	"os"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
	"golang.org/x/term"
)

// IOStreams are a command's standard streams and what is known about the
// terminal behind them. Results go to Out, messages and errors to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// StdoutTTY says whether Out is a terminal: relative times, redrawn
	// watches and (unless NoColor) colour. SystemIO detects it; tests set it.
	StdoutTTY bool
	// NoColor turns colour off even on a terminal (NO_COLOR is set).
	NoColor bool
	// ColorProfile is the terminal's colour capability when colour is on;
	// the zero value (termenv.TrueColor) is what tests force for goldens.
	ColorProfile termenv.Profile
}

// SystemIO returns the process's streams with the terminal detected from
// stdout and NO_COLOR read from getenv.
func SystemIO(getenv func(string) string) IOStreams {
	s := IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	s.StdoutTTY = term.IsTerminal(int(os.Stdout.Fd()))
	s.NoColor = getenv("NO_COLOR") != ""
	if s.StdoutTTY && !s.NoColor {
		s.ColorProfile = termenv.NewOutput(os.Stdout, termenv.WithEnvironment(envFunc(getenv))).EnvColorProfile()
	} else {
		s.ColorProfile = termenv.Ascii
	}
	return s
}

type envFunc func(string) string

func (f envFunc) Environ() []string      { return nil }
func (f envFunc) Getenv(k string) string { return f(k) }

// IsStdoutTTY reports whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.StdoutTTY }

// ColorEnabled reports whether output may be coloured: Out is a terminal,
// NO_COLOR is not set and the terminal has colours.
func (s *IOStreams) ColorEnabled() bool {
	return s.StdoutTTY && !s.NoColor && s.ColorProfile != termenv.Ascii
}

// ColorScheme returns the colours of Out: every method is the identity
// when colour is off.
func (s *IOStreams) ColorScheme() *ColorScheme {
	if !s.ColorEnabled() {
		return &ColorScheme{}
	}
	r := lipgloss.NewRenderer(io.Discard)
	r.SetColorProfile(s.ColorProfile)
	return &ColorScheme{r: r}
}

// ColorScheme colours strings for one output stream. A nil renderer means
// no colour.
type ColorScheme struct {
	r *lipgloss.Renderer
}

// Enabled reports whether the scheme colours at all.
func (c *ColorScheme) Enabled() bool { return c.r != nil }

func (c *ColorScheme) fg(color, s string) string {
	if c.r == nil || s == "" {
		return s
	}
	return c.r.NewStyle().Foreground(lipgloss.Color(color)).Render(s)
}

// Green colours s green.
func (c *ColorScheme) Green(s string) string { return c.fg("2", s) }

// Yellow colours s yellow.
func (c *ColorScheme) Yellow(s string) string { return c.fg("3", s) }

// Red colours s red.
func (c *ColorScheme) Red(s string) string { return c.fg("1", s) }

// Gray colours s grey.
func (c *ColorScheme) Gray(s string) string { return c.fg("8", s) }

// Bold makes s bold.
func (c *ColorScheme) Bold(s string) string {
	if c.r == nil || s == "" {
		return s
	}
	return c.r.NewStyle().Bold(true).Render(s)
}

// Health colours a health word: healthy green, degraded yellow, unhealthy
// red, anything else grey.
func (c *ColorScheme) Health(h string) string {
	switch h {
	case "healthy":
		return c.Green(h)
	case "degraded":
		return c.Yellow(h)
	case "unhealthy":
		return c.Red(h)
	}
	return c.Gray(h)
}

// Ready colours a readiness: true green, false red.
func (c *ColorScheme) Ready(ready bool) string {
	if ready {
		return c.Green("true")
	}
	return c.Red("false")
}
