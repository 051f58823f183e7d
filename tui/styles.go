package tui

import (
	"github.com/charmbracelet/bubbles/help"
	"github.com/charmbracelet/lipgloss"
)

// styles are the model's styles, all bound to one renderer so that its
// colour profile (Ascii for NO_COLOR) applies to every one of them.
type styles struct {
	title, header, dim          lipgloss.Style
	banner, bannerTitle         lipgloss.Style
	colHeader, selected         lipgloss.Style
	bad, warn                   lipgloss.Style
	footer, helpKey, helpDesc   lipgloss.Style
	helpSep, detailKey, filterS lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	red, yellow, grey := lipgloss.Color("9"), lipgloss.Color("11"), lipgloss.Color("8")
	return styles{
		title:       r.NewStyle().Bold(true),
		header:      r.NewStyle(),
		dim:         r.NewStyle().Faint(true),
		banner:      r.NewStyle().Border(lipgloss.ThickBorder()).BorderForeground(red).Padding(0, 1),
		bannerTitle: r.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(red),
		colHeader:   r.NewStyle().Bold(true),
		selected:    r.NewStyle().Reverse(true),
		bad:         r.NewStyle().Bold(true).Foreground(red),
		warn:        r.NewStyle().Foreground(yellow),
		footer:      r.NewStyle(),
		helpKey:     r.NewStyle().Bold(true),
		helpDesc:    r.NewStyle().Foreground(grey),
		helpSep:     r.NewStyle().Foreground(grey),
		detailKey:   r.NewStyle().Bold(true),
		filterS:     r.NewStyle().Bold(true),
	}
}

// help returns a help model drawn with these styles (help.New would bind
// the default renderer's).
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
