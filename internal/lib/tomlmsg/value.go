package tomlmsg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// valuePrefix marks, inside the decoder's error, a message from a field's
// own check (the decoder keeps only the text of what UnmarshalText
// returned).
const valuePrefix = "stem value check: "

// ValueError is what a field's UnmarshalText returns for a value outside
// its set; Explain puts it on its line: `line 6: tasks.agents.max_level
// "al" is not a level: choose full, assist, observe or none`.
type ValueError struct{ Msg string }

func (e *ValueError) Error() string { return valuePrefix + e.Msg }

// BadValue is a ValueError with a formatted message.
func BadValue(format string, args ...any) error {
	return &ValueError{Msg: fmt.Sprintf(format, args...)}
}

// explainValue rewrites the decoder's wrapping of a ValueError.
func explainValue(err error) (error, bool) {
	var pe toml.ParseError
	if !errors.As(err, &pe) || !strings.HasPrefix(pe.Message, valuePrefix) {
		return nil, false
	}
	return fmt.Errorf("line %d: %s %s", pe.Line, pe.LastKey, strings.TrimPrefix(pe.Message, valuePrefix)), true
}
