package mcpserver

// assistTools are added at assist (and full, unless a definition says max).
func assistTools() []toolDef {
	var out []toolDef
	out = append(out, nvimAssistTools()...)
	out = append(out, proposalTools()...)
	out = append(out, paneAssistTools()...)
	out = append(out, gdbAssistTools()...)
	out = append(out, taskActionTools()...)
	return out
}

// fullTools exist only at the full level.
func fullTools() []toolDef {
	var out []toolDef
	out = append(out, nvimFullTools()...)
	out = append(out, paneFullTools()...)
	out = append(out, gdbFullTools()...)
	return out
}
