package attach

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stem-edu/stem/internal/cmdutil"
	"github.com/stem-edu/stem/internal/decision"
	"github.com/stem-edu/stem/internal/hostterm"
)

// spoolQuestions opens the instance's decision spool for the host line and
// records this terminal as present (so an asker knows someone can answer)
// until release.
func spoolQuestions(f *cmdutil.Factory) func(instance, input string) (hostterm.Questions, func(), error) {
	return func(instance, input string) (hostterm.Questions, func(), error) {
		dirs, err := f.Dirs()
		if err != nil {
			return nil, nil, err
		}
		sp, err := decision.Open(dirs.State, instance)
		if err != nil {
			return nil, nil, fmt.Errorf("the host line: %w", err)
		}
		release, err := sp.Attend(input)
		if err != nil {
			return nil, nil, fmt.Errorf("the host line: %w", err)
		}
		return spoolAdapter{sp, input}, release, nil
	}
}

// participants reads who is connected to the instance's session, from
// the files each stem-mcp server keeps in the host spool.
func participants(f *cmdutil.Factory, instance string) func() []string {
	dirs, err := f.Dirs()
	if err != nil {
		return nil
	}
	sp, err := decision.Open(dirs.State, instance)
	if err != nil {
		return nil
	}
	return func() []string {
		var who []string
		for _, p := range sp.Participants() {
			// A client without a name is already called by its level.
			if lv := " (" + p.Level + ")"; !strings.HasSuffix(p.Who, lv) {
				p.Who += lv
			}
			who = append(who, p.Who)
		}
		return who
	}
}

// spoolAdapter gives the relay the spool's questions and records its
// answers with the host input that gave them.
type spoolAdapter struct {
	sp    *decision.Spool
	input string
}

func (a spoolAdapter) Watch(ctx context.Context) <-chan []hostterm.Question {
	out := make(chan []hostterm.Question)
	go func() {
		defer close(out)
		for qs := range a.sp.Watch(ctx) {
			hq := make([]hostterm.Question, len(qs))
			for i, q := range qs {
				hq[i] = hostterm.Question{ID: q.ID, From: q.From, Text: q.Text}
				for _, c := range q.Choices {
					hq[i].Choices = append(hq[i].Choices, hostterm.Choice(c))
				}
			}
			select {
			case out <- hq:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (a spoolAdapter) Answer(id string, c hostterm.Choice) error {
	return a.sp.Answer(decision.Answer{ID: id, Choice: decision.Choice(c), Input: a.input, At: time.Now().UTC()})
}
