package tui

import (
	"fmt"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
)

// filterModel is the filter line sub-model: a bubbles textinput holding
// the filter text and, while it has the focus, editing it. The parent
// applies its text to the node table whenever it changes (typing filters
// as you go).
//
// The textinput edits but does not draw: View draws the line itself, with
// the block █ as the cursor. The textinput's cursor is a reverse-video
// cell, which without colour (NO_COLOR, --once, the golden files) is a
// blank; its blinking would also need a timer that Options.Done does not
// end. The virtual cursor is therefore off, and so is its clipboard paste
// (ctrl+v), which would read the clipboard from inside the model.
type filterModel struct {
	st    styles
	input textinput.Model
}

// filterAction is what a key in the filter line asks of the parent
// besides the edit itself.
type filterAction int

const (
	// filterEdited: the key edited the line, or did nothing.
	filterEdited filterAction = iota
	// filterMove: the key moves the table's cursor; the parent hands it
	// to the node table.
	filterMove
)

func newFilter(st styles) filterModel {
	in := textinput.New()
	in.Prompt = "/"
	in.SetVirtualCursor(false)
	in.KeyMap.Paste = key.NewBinding(key.WithDisabled())
	return filterModel{st: st, input: in}
}

// editing reports whether the filter line has the focus.
func (f filterModel) editing() bool { return f.input.Focused() }

// value is the filter text.
func (f filterModel) value() string { return f.input.Value() }

// focus starts editing the filter text where it is, at its end.
func (f filterModel) focus() filterModel {
	f.input.Focus() // no command: the virtual cursor, whose blink it starts, is off
	f.input.CursorEnd()
	return f
}

// clear empties the filter and ends editing.
func (f filterModel) clear() filterModel {
	f.input.Blur()
	f.input.Reset()
	return f
}

// Update applies one key while the line has the focus: enter keeps the
// filter, esc clears it, the arrow and page keys move the table's cursor,
// the rest edit the text (textinput's keys: typing, backspace, ctrl+u,
// ←/→, ...).
func (f filterModel) Update(msg tea.KeyPressMsg) (filterModel, filterAction) {
	if !f.editing() {
		return f, filterEdited
	}
	switch msg.Code {
	case tea.KeyEnter:
		f.input.Blur()
	case tea.KeyEscape:
		f = f.clear()
	case tea.KeyUp, tea.KeyDown, tea.KeyPgUp, tea.KeyPgDown:
		return f, filterMove
	default:
		f.input, _ = f.input.Update(msg) // no command: no blink, no paste
	}
	return f, filterEdited
}

// View is the filter's part of the status line: the line being edited,
// the filter kept, or nothing.
func (f filterModel) View() string {
	switch v := []rune(f.value()); {
	case f.editing():
		pos := min(f.input.Position(), len(v))
		return f.st.filterS.Render(f.input.Prompt+string(v[:pos])+"█"+string(v[pos:])) + " (enter keep, esc clear)"
	case len(v) > 0:
		return fmt.Sprintf("filter %q (/ edit, esc clear)", string(v))
	}
	return ""
}
