// Package shellwords splits a plain command line into words and quotes words
// for a POSIX shell. The debug layout needs the debugger's argv (the gdb
// bridge inserts its own arguments), so a manifest's `debug` command must be
// a plain command line: words, quotes and backslashes, but no pipes,
// redirections, substitutions or variables, which Split refuses.
package shellwords

import (
	"errors"
	"fmt"
	"strings"
)

// maxLine bounds the input.
const maxLine = 8192

// Split parses line into words like a POSIX shell would for a simple
// command, and refuses anything that needs a shell to mean what it says.
func Split(line string) ([]string, error) {
	if len(line) > maxLine {
		return nil, fmt.Errorf("command line is %d bytes; the limit is %d", len(line), maxLine)
	}
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(line[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				switch line[i] {
				case '\\':
					if i+1 < len(line) && strings.IndexByte("\\\"$`\n", line[i+1]) >= 0 {
						i++
					}
				case '$', '`':
					return nil, fmt.Errorf("%q inside double quotes needs a shell; use single quotes", line[i])
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, errors.New("unterminated double quote")
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(line) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(line[i])
			inWord = true
		case strings.IndexByte("|&;<>()$`*?[]{}~#\n\r!", c) >= 0:
			return nil, fmt.Errorf("%q needs a shell; the command must be a plain command line (put anything more complex in a script or a make target)", c)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	return words, nil
}
