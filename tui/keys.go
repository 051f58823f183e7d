package tui

import "charm.land/bubbles/v2/key"

// keyMap is the model's key bindings; it is also the help.KeyMap the footer
// and the full help render.
type keyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Left, Right                             key.Binding
	Filter, SortNext, SortPrev, Order       key.Binding
	Coordinators, Workers, Problems         key.Binding
	Detail, Back, Refresh, Help, Quit       key.Binding
	// Command (:) switches the view, k9s style: :nodes, :events,
	// :coordinators. SortBy are Shift+letter sorts by one column.
	Command key.Binding
	SortBy  key.Binding
	// short are the compact forms the one-line footer shows.
	short []key.Binding
	// width is the terminal's: FullHelp lays the keys out in as many
	// columns as fit (0: all four).
	width int
}

func newKeyMap() keyMap {
	k := keyMap{
		Up:           key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:         key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:       key.NewBinding(key.WithKeys("pgup", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PageDown:     key.NewBinding(key.WithKeys("pgdown", "ctrl+f", "space"), key.WithHelp("pgdn", "page down")),
		Top:          key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g/home", "first row")),
		Bottom:       key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G/end", "last row")),
		Left:         key.NewBinding(key.WithKeys("left", "h"), key.WithHelp("←/h", "scroll columns left")),
		Right:        key.NewBinding(key.WithKeys("right", "l"), key.WithHelp("→/l", "scroll columns right")),
		Filter:       key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		SortNext:     key.NewBinding(key.WithKeys("s", ">"), key.WithHelp("s/>", "next sort column")),
		SortPrev:     key.NewBinding(key.WithKeys("S", "<"), key.WithHelp("S/<", "previous sort column")),
		Order:        key.NewBinding(key.WithKeys("o"), key.WithHelp("o", "reverse order")),
		Coordinators: key.NewBinding(key.WithKeys("c"), key.WithHelp("c", "toggle coordinators")),
		Workers:      key.NewBinding(key.WithKeys("w"), key.WithHelp("w", "toggle workers")),
		Problems:     key.NewBinding(key.WithKeys("u"), key.WithHelp("u", "only problem nodes")),
		Detail:       key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "node detail")),
		Back:         key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back / clear filter")),
		Refresh:      key.NewBinding(key.WithKeys("r"), key.WithHelp("r", "refresh now")),
		Help:         key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Quit:         key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
		Command:      key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "view :nodes :events :coord")),
		SortBy:       key.NewBinding(key.WithKeys("N", "H", "A", "V", "R", "B"), key.WithHelp("N H A V R B", "sort by that column")),
	}
	// Display only: never matched. A binding without keys counts as disabled.
	help := func(keys, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(keys), key.WithHelp(keys, desc))
	}
	// ? and q first: a narrow footer cuts from the right, and these two
	// must always show.
	k.short = []key.Binding{
		help("?", "help"), help("q", "quit"), help("/", "filter"), help("s/S", "sort"), help("o", "order"),
		help("c/w", "roles"), help("u", "problems"), help("enter", "detail"), help("r", "refresh"),
	}
	return k
}

// ShortHelp is the footer's one-line help.
func (k keyMap) ShortHelp() []key.Binding { return k.short }

// FullHelp is the help shown by ?: four columns on a wide terminal, two
// below 130 columns and one below 56, so that it always fits.
func (k keyMap) FullHelp() [][]key.Binding {
	nav := []key.Binding{k.Up, k.Down, k.PageUp, k.PageDown, k.Top, k.Bottom, k.Left, k.Right}
	sorting := []key.Binding{k.Filter, k.SortNext, k.SortPrev, k.Order}
	views := []key.Binding{k.Coordinators, k.Workers, k.Problems, k.Detail, k.Back}
	misc := []key.Binding{k.Command, k.Refresh, k.Help, k.Quit}
	sorting = append(sorting, k.SortBy)
	switch {
	case k.width > 0 && k.width < 56:
		return [][]key.Binding{append(append(append(append([]key.Binding{}, misc...), sorting...), views...), nav...)}
	case k.width > 0 && k.width < 130:
		return [][]key.Binding{append(append([]key.Binding{}, misc...), nav...), append(append([]key.Binding{}, sorting...), views...)}
	}
	return [][]key.Binding{nav, sorting, views, misc}
}
