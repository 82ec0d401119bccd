package mcpserver

import "github.com/stem-edu/stem/internal/levels"

// Level is an access level (package levels, which stemctl links without
// this server).
type Level = levels.Level

const (
	Observe = levels.Observe
	Assist  = levels.Assist
	Full    = levels.Full
)
