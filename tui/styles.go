package tui

import (
	"charm.land/bubbles/v2/help"
	"charm.land/lipgloss/v2"
)

// styles are the model's styles. They render with full colour; the
// writer downsamples to the terminal's profile (bubbletea's renderer for
// the live view, a colorprofile.Writer for --once), so NO_COLOR and
// non-terminals get no escape sequences.
type styles struct {
	title, header, dim          lipgloss.Style
	banner, bannerTitle         lipgloss.Style
	colHeader, selected         lipgloss.Style
	bad, warn                   lipgloss.Style
	footer, helpKey, helpDesc   lipgloss.Style
	helpSep, detailKey, filterS lipgloss.Style
}

func newStyles() styles {
	red, yellow, grey := lipgloss.Color("9"), lipgloss.Color("11"), lipgloss.Color("8")
	return styles{
		title:       lipgloss.NewStyle().Bold(true),
		header:      lipgloss.NewStyle(),
		dim:         lipgloss.NewStyle().Faint(true),
		banner:      lipgloss.NewStyle().Border(lipgloss.ThickBorder()).BorderForeground(red).Padding(0, 1),
		bannerTitle: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(red),
		colHeader:   lipgloss.NewStyle().Bold(true),
		selected:    lipgloss.NewStyle().Reverse(true),
		bad:         lipgloss.NewStyle().Bold(true).Foreground(red),
		warn:        lipgloss.NewStyle().Foreground(yellow),
		footer:      lipgloss.NewStyle(),
		helpKey:     lipgloss.NewStyle().Bold(true),
		helpDesc:    lipgloss.NewStyle().Foreground(grey),
		helpSep:     lipgloss.NewStyle().Foreground(grey),
		detailKey:   lipgloss.NewStyle().Bold(true),
		filterS:     lipgloss.NewStyle().Bold(true),
	}
}

// help returns a help model drawn with these styles (help.New would pick
// light or dark defaults, which needs a terminal query).
func (s styles) help() help.Model {
	return help.Model{
		ShortSeparator: " • ",
		FullSeparator:  "    ",
		Ellipsis:       "…",
		Styles: help.Styles{
			Ellipsis:       s.helpSep,
			ShortKey:       s.helpKey,
			ShortDesc:      s.helpDesc,
			ShortSeparator: s.helpSep,
			FullKey:        s.helpKey,
			FullDesc:       s.helpDesc,
			FullSeparator:  s.helpSep,
		},
	}
}
