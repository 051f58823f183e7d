package cmdutil

import (
	"io"
	"os"
	"strings"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/colorprofile"
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
	// ColorProfile is the terminal's colour capability, read from the
	// environment (TERM, COLORTERM, NO_COLOR, CLICOLOR), never by asking the
	// terminal; the zero value (Unknown) has no colour.
	ColorProfile colorprofile.Profile
}

// SystemIO returns the process's streams with the terminal detected from
// stdout and the colour profile from environ. It sends nothing to the
// terminal: a terminal that never answers a query costs no time.
func SystemIO(environ []string) IOStreams {
	s := IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	s.StdoutTTY = term.IsTerminal(int(os.Stdout.Fd()))
	s.NoColor = lookupEnv(environ, "NO_COLOR") != ""
	s.ColorProfile = colorprofile.Ascii
	if s.StdoutTTY && !s.NoColor {
		s.ColorProfile = colorprofile.Detect(os.Stdout, environ)
	}
	return s
}

// lookupEnv returns the value of key in environ (the last one wins), or "".
func lookupEnv(environ []string, key string) string {
	v := ""
	for _, kv := range environ {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// IsStdoutTTY reports whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.StdoutTTY }

// ColorEnabled reports whether output may be coloured: Out is a terminal,
// NO_COLOR is not set and the terminal has colours.
func (s *IOStreams) ColorEnabled() bool {
	return s.StdoutTTY && !s.NoColor && s.ColorProfile >= colorprofile.ANSI
}

// ColorScheme returns the colours of Out: every method is the identity
// when colour is off.
func (s *IOStreams) ColorScheme() *ColorScheme {
	if !s.ColorEnabled() {
		return &ColorScheme{}
	}
	return &ColorScheme{on: true}
}

// ColorScheme colours strings for one output stream. It uses only the 16
// basic colours, which every profile from ANSI up shows as they are.
type ColorScheme struct {
	on bool
}

// Enabled reports whether the scheme colours at all.
func (c *ColorScheme) Enabled() bool { return c.on }

func (c *ColorScheme) fg(color, s string) string {
	if !c.on || s == "" {
		return s
	}
	return lipgloss.NewStyle().Foreground(lipgloss.Color(color)).Render(s)
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
	if !c.on || s == "" {
		return s
	}
	return lipgloss.NewStyle().Bold(true).Render(s)
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
